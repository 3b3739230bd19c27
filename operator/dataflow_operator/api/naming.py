"""Names of what the operator creates for a Replica that clients outside it need too.

The operator builds the driver's Service and the control token's Secret under these
names; ``dataflow-operator subscribe``/``peek`` find them by the same rule.
"""

from __future__ import annotations

import hashlib
import re

__all__ = [
    "CONTROL_PORT_NAME",
    "CONTROL_TOKEN_KEY",
    "attempts_service_name",
    "control_token_secret_name",
    "driver_service_name",
    "short_digest",
]

CONTROL_PORT_NAME = "control"
"""The name of the control API's port on the driver pod and its Service."""
CONTROL_TOKEN_KEY = "token"
"""The key of the token in the control token Secret."""

_MAX_DNS_LABEL = 63
_NOT_DNS = re.compile(r"[^a-z0-9-]")


def short_digest(text: str, length: int = 8) -> str:
    """A short hex digest that keeps truncated names unique."""
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def driver_service_name(replica: str) -> str:
    """The Service of a replica's serving driver (a DNS-1035 label, at most 63 chars)."""
    return _service_name(replica, "driver")


def attempts_service_name(replica: str) -> str:
    """The headless Service that gives every driver attempt of a replica its own DNS name
    (``driver-N.<this>``), which its executors reach it by."""
    return _service_name(replica, "attempts")


def _service_name(replica: str, kind: str) -> str:
    base = _NOT_DNS.sub("-", replica.lower())
    name = f"{base}-{kind}"
    if len(name) <= _MAX_DNS_LABEL and name[0].isalpha():
        return name
    keep = _MAX_DNS_LABEL - len(kind) - 13
    return f"df-{base[:keep].strip('-')}-{short_digest(replica)}-{kind}"


def control_token_secret_name(replica: str) -> str:
    """The Secret holding a replica's control API token: ``{replica}-control-token``."""
    suffix = "-control-token"
    if len(replica) + len(suffix) <= 253:
        return replica + suffix
    return f"{replica[: 253 - len(suffix) - 9]}-{short_digest(replica)}{suffix}"
