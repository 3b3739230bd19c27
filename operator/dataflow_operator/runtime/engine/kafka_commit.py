"""A kafka source's consumer group, committed upstream at its offset resumption frontier.

A kafka source is read with its own positions (in Spark's offset log and its ingested
collection), never through the consumer group; the group's offsets say how far the
input is no longer needed, so that the usual consumer-lag monitoring sees the replicas'
progress. After each release step the engine hands :class:`GroupCommitter` the
positions to commit: the source's offset resumption frontier on this replica, or, on a
cluster, its meet with what the operator sent (``PUT /release``: the meet over every
replica). Offsets only move forward (:func:`~dataflow_operator.core.kafka.to_commit`);
what the group had is asked once, then remembered. The admin client connects as the
source's reader does (:func:`admin_config`: its ``properties`` and ``propertiesFromEnv``),
so a secured broker accepts the commit too.

Commits run in the background, one at a time per group, so that a broker out of reach
never holds the engine's steps: a release hands over the newest positions and takes the
outcome of the commit before. A failed commit raises then; the releaser turns it into a
warning, a count in the source's report (``releaseFailures``, its metric) and a retry at
the next release. It never stops a dataflow.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Protocol

from dataflow_operator.api.dataflow import Source
from dataflow_operator.core.kafka import positions_meet, to_commit
from dataflow_operator.runtime.sources.kafka import POSITIONS_FILE, default_group_id
from dataflow_operator.runtime.sources.kafka_client import (
    QUIET_DEFAULTS,
    KafkaFailure,
    client_factory,
    refused_config,
)
from dataflow_operator.runtime.sources.kafka_config import ClientConfig, client_config
from dataflow_operator.runtime.storage import Location

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient

__all__ = [
    "AdminFactory",
    "ConfluentAdmin",
    "GroupAdmin",
    "GroupCommitter",
    "GroupKey",
    "admin_config",
    "config_digest",
    "write_positions",
]

TIMEOUT = 10.0
"""Seconds one admin request may take."""
CLOSE_SECONDS = 15.0
"""How long closing waits for the commits under way (the last positions of a run)."""


class GroupAdmin(Protocol):
    """What committing needs of a Kafka admin client."""

    def committed(self, group: str, topic: str) -> dict[int, int]:
        """The group's committed offsets for ``topic`` (partition → offset)."""
        ...

    def commit(self, group: str, topic: str, offsets: Mapping[int, int]) -> None:
        """Set the group's offsets for ``topic`` (the group has no active member)."""
        ...

    def close(self) -> None:
        """Release the connection."""
        ...


AdminFactory = Callable[[str, ClientConfig], GroupAdmin]
"""Makes the admin client of bootstrap servers with a configuration (``bootstrap.servers``
and the source's client properties): :class:`ConfluentAdmin`, or a test's."""
GroupKey = tuple[str, str, str, str]
"""(servers, group, topic, :func:`config_digest` of the admin client's configuration): two
sources that connect differently (other credentials) never share an admin client."""


def config_digest(config: Mapping[str, str | bool]) -> str:
    """A digest of a client configuration: what tells admin clients apart without keeping
    its secrets in the keys."""
    text = json.dumps(sorted(config.items()))
    return hashlib.sha256(text.encode()).hexdigest()


def admin_config(source: Source, environ: Mapping[str, str] | None = None) -> ClientConfig:
    """The configuration of the admin client that commits kafka ``source``'s group: its
    bootstrap servers and client properties, as its reader connects (a variable of
    ``propertiesFromEnv`` missing raises :class:`KafkaFailure`)."""
    kafka = source.kafka
    assert kafka is not None
    owned: dict[str, str | bool] = {"bootstrap.servers": kafka.bootstrap_servers}
    return client_config(kafka.topic, owned, kafka.properties, kafka.properties_from_env, environ)


class GroupCommitter:
    """Commits consumer groups' offsets, one admin client per bootstrap servers and
    configuration; in the background unless ``synchronous``."""

    def __init__(self, connect: AdminFactory | None = None, *, synchronous: bool = False) -> None:
        self.connect: AdminFactory = connect or client_factory("admin", ConfluentAdmin)
        self._admins: dict[tuple[str, str], GroupAdmin] = {}
        """(servers, configuration digest) → its admin client."""
        self._known: dict[GroupKey, dict[int, int]] = {}
        """A group's offsets, as last read or committed."""
        self._pool = None if synchronous else ThreadPoolExecutor(1, "kafka-commit")
        self._pending: dict[GroupKey, Future[dict[int, int]]] = {}

    def commit(
        self, key: GroupKey, config: ClientConfig, positions: Mapping[int, int]
    ) -> dict[int, int]:
        """Commit ``positions`` where they are past the group's offsets (the admin client
        made with ``config``); the group's offsets after. Raises on a failure (nothing is
        remembered of it)."""
        servers, group, topic, digest = key
        admin = self._admins.get((servers, digest))
        if admin is None:
            admin = self._admins[servers, digest] = self.connect(servers, config)
        try:
            known = self._known.get(key)
            if known is None:
                known = self._known[key] = admin.committed(group, topic)
            offsets = to_commit(positions, known)
            if offsets:
                admin.commit(group, topic, offsets)
                known = self._known[key] = {**known, **offsets}
        except Exception:
            # librdkafka aborts the process when an admin client whose group request
            # failed (a broker out of reach) sends another, or sees the broker come back
            # (its issue #4605): the client is destroyed now, the next attempt gets a new one
            if self._admins.get((servers, digest)) is admin:
                del self._admins[servers, digest]
            admin.close()
            raise
        return dict(known)

    def commit_source(
        self,
        source: Source,
        cluster: str,
        key: tuple[str, str],
        own: Mapping[int, int],
        meet: Mapping[int, int] | None,
    ) -> dict[int, int]:
        """Commit kafka ``source`` (of dataflow and source ``key``) at the meet of this
        replica's positions ``own`` and the cluster's ``meet`` (``None``: not known yet,
        nothing is committed); the group's offsets after, or ``{}``. A failure raises,
        naming the group."""
        kafka = source.kafka
        assert kafka is not None
        target = positions_meet([own, meet])
        group = kafka.group_id or default_group_id(cluster, *key)
        config = admin_config(source)
        at = (kafka.bootstrap_servers, group, kafka.topic, config_digest(config))
        failure: BaseException | None = None
        pending = self._pending.get(at)
        if pending is not None:
            if not pending.done():
                return dict(self._known.get(at, {}))  # the one before is under way
            del self._pending[at]
            failure = pending.exception()
        if target and failure is None:
            if self._pool is None:
                try:
                    self.commit(at, config, target)
                except Exception as error:
                    failure = error
            else:
                self._pending[at] = self._pool.submit(self.commit, at, config, target)
        if failure is not None:
            raise KafkaFailure(f"commit to consumer group {group!r}: {failure}") from failure
        return dict(self._known.get(at, {}))

    def close(self) -> None:
        """Wait a while for the commits under way, then close every admin client."""
        if self._pool is not None:
            wait(self._pending.values(), timeout=CLOSE_SECONDS)
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = ThreadPoolExecutor(1, "kafka-commit")
        for admin in self._admins.values():
            admin.close()
        self._admins.clear()


def write_positions(logs: Location, seq: int, positions: Mapping[int, int]) -> None:
    """Record a kafka source's positions at the ingested collection's offset ``seq``
    (before the collection records ``seq`` as its upper)."""
    partitions = {str(p): o for p, o in sorted(positions.items())}
    logs.child(POSITIONS_FILE).write_text(json.dumps({"seq": seq, "partitions": partitions}))


class ConfluentAdmin:
    """:class:`GroupAdmin` on confluent-kafka's admin client, made with ``config`` (which
    holds ``bootstrap.servers``: see :func:`admin_config`)."""

    def __init__(self, servers: str, config: Mapping[str, str | bool]) -> None:
        from confluent_kafka.admin import AdminClient

        with refused_config(f"servers {servers!r}", "admin client"):
            self._admin: AdminClient | None = AdminClient(
                {**QUIET_DEFAULTS, "bootstrap.servers": servers, **config}
            )

    @property
    def admin(self) -> AdminClient:
        """The open admin client (a closed wrapper raises)."""
        if self._admin is None:
            raise KafkaFailure("the admin client was closed")
        return self._admin

    def committed(self, group: str, topic: str) -> dict[int, int]:
        """The group's offsets for the topic (a partition never committed is absent)."""
        from confluent_kafka import ConsumerGroupTopicPartitions

        request = [ConsumerGroupTopicPartitions(group)]
        future = self.admin.list_consumer_group_offsets(request, request_timeout=TIMEOUT)
        result = future[group].result(timeout=TIMEOUT + 5)
        return {
            int(found.partition): int(found.offset)
            for found in result.topic_partitions or []
            if found.topic == topic and found.offset >= 0
        }

    def commit(self, group: str, topic: str, offsets: Mapping[int, int]) -> None:
        """Alter the group's offsets; a partition the broker refused raises, named."""
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

        partitions = [TopicPartition(topic, p, o) for p, o in sorted(offsets.items())]
        request = [ConsumerGroupTopicPartitions(group, partitions)]
        future = self.admin.alter_consumer_group_offsets(request, request_timeout=TIMEOUT)
        result = future[group].result(timeout=TIMEOUT + 5)
        for found in result.topic_partitions or []:
            if found.error is not None:
                raise KafkaFailure(
                    f"group {group!r} topic {topic!r} partition {found.partition}: {found.error}"
                )

    def close(self) -> None:
        """Destroy the admin client (confluent-kafka destroys it with its last reference;
        a reference to this wrapper, a traceback's, no longer keeps it)."""
        self._admin = None
