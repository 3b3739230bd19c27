"""How far a source's input may be released upstream (design 3, bounded input reliance).

A source's **timestamp resumption frontier** is the meet of the uppers of everything
durably derived from it that a restart needs (its ingested collection, its offset↔time
log): below it, nothing has to be read from the upstream again. The **offset resumption
frontier** is that time mapped back to the source's offsets through the remap log. Files
wholly below it may be released — but a directory read by several readers (dataflows on
one replica, replicas of one cluster) only below the slowest of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from dataflow_operator.core.time import Frontier, Timestamp

__all__ = [
    "RemapEntry",
    "offset_resumption",
    "releasable",
    "resumption_frontier",
]


def resumption_frontier(uppers: Iterable[Frontier]) -> Frontier:
    """The meet of the durable uppers: a restart resumes there and needs nothing below.

    With nothing durable yet, the frontier is the minimum: all input is still needed.
    """
    result: Frontier | None = None
    for upper in uppers:
        result = upper if result is None else result.meet(upper)
    return Frontier.minimum() if result is None else result


@dataclass(frozen=True, slots=True, order=True)
class RemapEntry:
    """One line of the remap log: once ``offset`` offsets are consumed, every update at a
    time below ``upper`` is ingested (and no update below it comes from a later offset)."""

    offset: int
    upper: Timestamp


def offset_resumption(remap: Sequence[RemapEntry], frontier: Frontier) -> int:
    """The offsets a restart at ``frontier`` never reads again: the largest offset whose
    upper is at or below the frontier (0 when none is).

    Offsets form a total order, and the remap log is monotone in both fields.
    """
    best = 0
    for entry in remap:
        if frontier.lower is None or entry.upper <= frontier.lower:
            best = max(best, entry.offset)
    return best


def releasable(consumed: Sequence[Iterable[str]]) -> set[str]:
    """The files every reader has consumed below its resumption frontier.

    ``consumed`` holds, per reader of one directory, the files it no longer needs from
    the upstream. No reader at all releases nothing: an unknown reader may still need
    everything.
    """
    if not consumed:
        return set()
    result = set(consumed[0])
    for files in consumed[1:]:
        result &= set(files)
    return result
