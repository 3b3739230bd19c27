"""What Kubernetes accepts as object names, what a Replica's name must leave room for, and
what a name must be to become one component of a path.

Every name that becomes a path — a Dataflow's and a Replica's (:func:`subdomain_problem`,
the rule ``check`` and the API server apply), a source's (an SQL identifier), an
attempt's (a number) — is checked by its rule where it enters (the control API, the
command line, the models the operator reads); :func:`segment_problem` is the rule each of
them implies, checked once more where the path is joined.
"""

from __future__ import annotations

import re

__all__ = [
    "DRIVER_SERVICE_SUFFIX",
    "MAX_DNS_LABEL",
    "MAX_REPLICA_NAME",
    "MAX_SEGMENT",
    "MAX_SUBDOMAIN",
    "replica_name_problem",
    "segment_problem",
    "subdomain_problem",
]

MAX_SUBDOMAIN = 253
MAX_DNS_LABEL = 63
DRIVER_SERVICE_SUFFIX = "-driver"
"""A Replica ``r1``'s driver Service is ``r1-driver`` (``api/naming.py``)."""
MAX_REPLICA_NAME = MAX_DNS_LABEL - len(DRIVER_SERVICE_SUFFIX)
"""56: the driver Service's name, and the labels that carry the Replica's name, are DNS
labels of at most 63 characters."""
MAX_SEGMENT = 255
"""The longest file name most filesystems (and object-store path components) take."""
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


def segment_problem(name: str) -> str | None:
    """Why ``name`` cannot be one component of a path below a root, or None.

    Refused: the empty name, ``.`` and ``..``, a ``/`` or ``\\`` (more than one
    component), a NUL or other control character, and more than :data:`MAX_SEGMENT`
    characters. Every DNS-1123 subdomain and every SQL identifier passes.
    """
    if not name:
        return "is empty"
    if name in (".", ".."):
        return f"{name!r} would leave its directory"
    if len(name) > MAX_SEGMENT:
        return f"must be at most {MAX_SEGMENT} characters, got {len(name)}"
    wrong = sorted({c for c in name if c in "/\\" or not c.isprintable()})
    if wrong:
        return (
            f"{name!r} is not one path component; {', '.join(repr(c) for c in wrong)} not allowed"
        )
    return None
