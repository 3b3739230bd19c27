"""Domain exceptions.

Every error the core raises is a :class:`DomainError` with a stable ``reason`` (a
CamelCase word usable as a Kubernetes condition reason) and a human message. Adapters map
them in one place: the controller to kopf errors, the CLI to exit codes and lines.
"""

from __future__ import annotations

__all__ = [
    "DomainError",
    "InvalidDuration",
    "InvalidSpec",
    "InvalidSql",
    "InvalidTimeline",
    "MultipleTimelines",
    "UnknownSource",
]


class DomainError(Exception):
    """A problem with user input or domain state that retrying will not fix."""

    reason: str = "InvalidSpec"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field

    def __str__(self) -> str:
        return self.message


class InvalidSpec(DomainError):
    """A spec value is malformed or inconsistent."""

    reason = "InvalidSpec"


class InvalidDuration(InvalidSpec):
    """A duration string could not be parsed, or was negative."""

    reason = "InvalidDuration"


class InvalidTimeline(InvalidSpec):
    """A timeline is malformed or uses a reserved name."""

    reason = "InvalidTimeline"


class MultipleTimelines(InvalidSpec):
    """A dataflow reads from sources of more than one timeline."""

    reason = "MultipleTimelines"


class UnknownSource(InvalidSpec):
    """A dataflow refers to a source or dataflow that does not exist."""

    reason = "UnknownSource"


class InvalidSql(InvalidSpec):
    """The SQL does not parse, or uses ``mz_now()`` in an unsupported way."""

    reason = "InvalidSql"
