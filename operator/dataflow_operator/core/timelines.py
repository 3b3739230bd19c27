"""Timelines: what a source's timestamps mean.

Timestamps from different timelines cannot be compared: epoch milliseconds from a wall
clock, a counter, or an external system's own clock. A dataflow therefore reads from one
timeline only; constants (sources with no timeline) fit any.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from dataflow_operator.core.errors import InvalidTimeline, MultipleTimelines

__all__ = [
    "MULTIPLE_TIMELINES_MESSAGE",
    "RESERVED_PREFIX_HINT",
    "Timeline",
    "TimelineKind",
    "dataflow_timeline",
    "validate_timeline_name",
]

MULTIPLE_TIMELINES_MESSAGE = "multiple timelines within one dataflow are not supported"
RESERVED_PREFIX_HINT = 'The prefix "mz_" is reserved for system timelines.'


class TimelineKind(StrEnum):
    """The kinds of timeline a source may declare."""

    EPOCH_MILLISECONDS = "EpochMilliseconds"
    USER = "user"
    EXTERNAL = "external"
    COUNTER = "counter"


@dataclass(frozen=True, slots=True)
class Timeline:
    """A timeline: EpochMilliseconds, or a named user, external or counter timeline."""

    kind: TimelineKind
    name: str | None = None

    @classmethod
    def epoch_milliseconds(cls) -> Timeline:
        """The default timeline: wall-clock epoch milliseconds."""
        return cls(TimelineKind.EPOCH_MILLISECONDS)

    @property
    def is_epoch_milliseconds(self) -> bool:
        """True for the wall-clock timeline, the only one that expires."""
        return self.kind is TimelineKind.EPOCH_MILLISECONDS

    def __str__(self) -> str:
        if self.name is None:
            return self.kind.value
        return f"{self.kind.value}:{self.name}"


def validate_timeline_name(name: str) -> str:
    """Check a user-given timeline name; ``mz_`` names are reserved."""
    if not name:
        raise InvalidTimeline("timeline name must not be empty")
    if name.startswith("mz_"):
        raise InvalidTimeline(f'unacceptable timeline name "{name}"\nHINT: {RESERVED_PREFIX_HINT}')
    return name


def dataflow_timeline(inputs: Iterable[tuple[str, Timeline | None]]) -> Timeline | None:
    """The single timeline of a dataflow's transitive inputs.

    ``inputs`` pairs each input's name with its timeline (``None`` for a constant, which
    fits any timeline). Returns ``None`` when every input is constant. Raises
    :class:`MultipleTimelines` — the exact message, then a detail line naming each
    timeline and the inputs that bring it — when there are two or more.
    """
    by_timeline: dict[Timeline, list[str]] = {}
    for name, timeline in inputs:
        if timeline is not None:
            by_timeline.setdefault(timeline, []).append(name)
    if len(by_timeline) <= 1:
        return next(iter(by_timeline), None)
    detail = "; ".join(
        f"{timeline} ({', '.join(sorted(set(names)))})"
        for timeline, names in sorted(by_timeline.items(), key=lambda item: str(item[0]))
    )
    raise MultipleTimelines(f"{MULTIPLE_TIMELINES_MESSAGE}\nDETAIL: timelines: {detail}")
