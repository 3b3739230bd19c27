"""Logical time and frontiers.

Timestamps are integer epoch milliseconds. A :class:`Frontier` is an antichain over this
total order, so it holds at most one element: a lower bound ``t`` (every time ``>= t`` may
still change) or nothing at all (the *empty* frontier: the collection is complete for
every time and will never change again). This follows timely dataflow's semantics:

- ``frontier.less_equal(t)`` is true when some element of the frontier is ``<= t``,
  i.e. ``t`` may still receive updates; it is false for every ``t`` when empty.
- Frontiers are ordered by "may still change less": ``F <= G`` when every time ``G``
  still allows is allowed by ``F``. The empty frontier is the greatest element.
- ``meet`` is the greatest lower bound (the minimum; empty is its identity), ``join``
  the least upper bound (the maximum; empty absorbs).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from functools import total_ordering

__all__ = [
    "MAX_TIMESTAMP",
    "MIN_TIMESTAMP",
    "Frontier",
    "Timestamp",
    "format_timestamp",
    "parse_timestamp",
]

Timestamp = int
"""Epoch milliseconds."""

MIN_TIMESTAMP: Timestamp = 0
MAX_TIMESTAMP: Timestamp = 2**63 - 1


@total_ordering
@dataclass(frozen=True, slots=True)
class Frontier:
    """An antichain over epoch milliseconds: one lower bound, or empty (closed)."""

    lower: Timestamp | None

    @classmethod
    def at(cls, time: Timestamp) -> Frontier:
        """The frontier ``{time}``: times ``>= time`` may still change."""
        return cls(time)

    @classmethod
    def empty(cls) -> Frontier:
        """The empty frontier: nothing will ever change again."""
        return cls(None)

    @classmethod
    def minimum(cls) -> Frontier:
        """The frontier ``{0}``: everything may still change."""
        return cls(MIN_TIMESTAMP)

    @classmethod
    def from_elements(cls, elements: list[Timestamp] | tuple[Timestamp, ...]) -> Frontier:
        """The frontier of a list of times (its minimum), as found in JSON status."""
        return cls(min(elements)) if elements else cls.empty()

    @property
    def is_empty(self) -> bool:
        """True when the frontier is closed."""
        return self.lower is None

    def elements(self) -> list[Timestamp]:
        """The antichain as a list: ``[]`` when empty, ``[t]`` otherwise."""
        return [] if self.lower is None else [self.lower]

    def less_equal(self, time: Timestamp) -> bool:
        """True when some element is ``<= time``: ``time`` may still change."""
        return self.lower is not None and self.lower <= time

    def less_than(self, time: Timestamp) -> bool:
        """True when some element is ``< time``."""
        return self.lower is not None and self.lower < time

    def meet(self, other: Frontier) -> Frontier:
        """Greatest lower bound: the smaller frontier (empty is the identity)."""
        if self.lower is None:
            return other
        if other.lower is None:
            return self
        return Frontier(min(self.lower, other.lower))

    def join(self, other: Frontier) -> Frontier:
        """Least upper bound: the larger frontier (empty absorbs)."""
        if self.lower is None or other.lower is None:
            return Frontier.empty()
        return Frontier(max(self.lower, other.lower))

    def __le__(self, other: object) -> bool:
        if not isinstance(other, Frontier):
            return NotImplemented
        if other.lower is None:
            return True
        return self.lower is not None and self.lower <= other.lower

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Frontier):
            return NotImplemented
        return self <= other and self != other

    def __str__(self) -> str:
        return "[]" if self.lower is None else f"[{self.lower}]"


def format_timestamp(time: Timestamp) -> str:
    """RFC 3339 in UTC with millisecond precision, e.g. ``2026-01-01T00:00:00.000Z``."""
    moment = datetime.fromtimestamp(time / 1000, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{time % 1000:03d}Z"


def parse_timestamp(text: str) -> Timestamp:
    """Parse epoch milliseconds (digits) or an RFC 3339 / ISO-8601 timestamp.

    A timestamp without a zone is taken as UTC. Raises ``ValueError`` with the reason.
    """
    stripped = text.strip()
    if stripped.lstrip("-").isdigit():
        value = int(stripped)
        if value < 0:
            raise ValueError(f"timestamp {text!r} is before the epoch")
        return value
    try:
        moment = datetime.fromisoformat(stripped.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"{text!r} is neither epoch milliseconds nor an RFC 3339 timestamp"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    millis = round(moment.timestamp() * 1000)
    if millis < 0:
        raise ValueError(f"timestamp {text!r} is before the epoch")
    return millis
