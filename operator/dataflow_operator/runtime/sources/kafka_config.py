"""A kafka source's Kafka client configuration: what the source sets itself, its
``properties`` and its ``propertiesFromEnv`` read from the replica's environment.

The spec (and so Spark's options and plans) carries only the names of the environment
variables that hold secrets; their values are read here, where a client is made (on the
driver, or an executor: each has the Replica's environment). The configuration built is
never logged.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

from dataflow_operator.runtime.sources.kafka_client import KafkaFailure

__all__ = ["ClientConfig", "client_config", "decode_properties", "encode_properties"]

ClientConfig = dict[str, str | bool]
"""A librdkafka configuration: property → value."""


def client_config(
    topic: str,
    owned: Mapping[str, str | bool],
    properties: Mapping[str, str],
    properties_from_env: Mapping[str, str],
    environ: Mapping[str, str] | None = None,
) -> ClientConfig:
    """The configuration of a client of ``topic``'s source: ``properties``, then each of
    ``properties_from_env`` (property → variable) read from ``environ`` (default: this
    process's), then ``owned`` (what the client sets itself, never overridden).

    A variable missing from ``environ`` raises :class:`KafkaFailure`, naming the topic,
    the property and the variable.
    """
    found = os.environ if environ is None else environ
    config: ClientConfig = dict(properties)
    for name, variable in properties_from_env.items():
        value = found.get(variable)
        if value is None:
            raise KafkaFailure(
                f"topic {topic!r}: propertiesFromEnv.{name}: environment variable {variable} "
                "is not set on this replica (set it in the Replica's spec.env)"
            )
        config[name] = value
    return config | dict(owned)


def encode_properties(properties: Mapping[str, str]) -> str:
    """A map of properties as one string option (JSON)."""
    return json.dumps(dict(sorted(properties.items())))


def decode_properties(text: str, option: str) -> dict[str, str]:
    """The map :func:`encode_properties` wrote (empty for ``""``); anything else than an
    object of strings raises ``ValueError``, naming the ``option``."""
    if not text:
        return {}
    decoded = json.loads(text)
    if not isinstance(decoded, dict) or not all(
        isinstance(key, str) and isinstance(value, str) for key, value in decoded.items()
    ):
        raise ValueError(f"option {option}: expected a JSON object of strings, got {text[:80]!r}")
    return {str(key): str(value) for key, value in decoded.items()}
