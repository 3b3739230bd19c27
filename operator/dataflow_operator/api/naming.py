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
    """The headless Service of a replica's driver (a DNS-1035 label, at most 63 chars)."""
    base = _NOT_DNS.sub("-", replica.lower())
    name = f"{base}-driver"
    if len(name) <= _MAX_DNS_LABEL and name[0].isalpha():
        return name
    return f"df-{base[: _MAX_DNS_LABEL - 19].strip('-')}-{short_digest(replica)}-driver"


def control_token_secret_name(replica: str) -> str:
    """The Secret holding a replica's control API token: ``{replica}-control-token``."""
    suffix = "-control-token"
    if len(replica) + len(suffix) <= 253:
        return replica + suffix
    return f"{replica[: 253 - len(suffix) - 9]}-{short_digest(replica)}{suffix}"
