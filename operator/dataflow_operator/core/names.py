"""What Kubernetes accepts as object names, and what a Replica's name must leave room for."""

from __future__ import annotations

import re

__all__ = [
    "DRIVER_SERVICE_SUFFIX",
    "MAX_DNS_LABEL",
    "MAX_REPLICA_NAME",
    "MAX_SUBDOMAIN",
    "replica_name_problem",
    "subdomain_problem",
]

MAX_SUBDOMAIN = 253
MAX_DNS_LABEL = 63
DRIVER_SERVICE_SUFFIX = "-driver"
"""A Replica ``r1``'s driver Service is ``r1-driver`` (``api/naming.py``)."""
MAX_REPLICA_NAME = MAX_DNS_LABEL - len(DRIVER_SERVICE_SUFFIX)
"""56: the driver Service's name, and the labels that carry the Replica's name, are DNS
labels of at most 63 characters."""
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def subdomain_problem(name: str) -> str | None:
    """Why ``name`` is not a DNS-1123 subdomain (what the API server requires), or None."""
    if len(name) > MAX_SUBDOMAIN:
        return f"must be at most {MAX_SUBDOMAIN} characters, got {len(name)}"
    if _SUBDOMAIN.fullmatch(name):
        return None
    wrong = sorted({c for c in name if not (c.islower() or c.isdigit() or c in "-.")})
    detail = f"; {', '.join(repr(c) for c in wrong)} not allowed" if wrong else ""
    return (
        f"{name!r} is not a DNS-1123 subdomain: lowercase letters, digits, '-' and '.', "
        f"starting and ending with a letter or digit{detail}"
    )


def replica_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a Replica, or None."""
    problem = subdomain_problem(name)
    if problem is not None:
        return problem
    if len(name) > MAX_REPLICA_NAME:
        return (
            f"a Replica's name must be at most {MAX_REPLICA_NAME} characters (got {len(name)}): "
            f"its driver Service {name[:20]}…{DRIVER_SERVICE_SUFFIX} and labels must fit in "
            f"{MAX_DNS_LABEL}"
        )
    return None
