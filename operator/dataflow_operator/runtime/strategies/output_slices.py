"""A stateful processor's output handed to Spark in frames of bounded size.

Each pandas frame a ``transformWithStateInPandas`` processor yields crosses to the JVM as
one Arrow batch, which Spark allocates whole in its direct memory (1 GiB by default). A
batch of input can make one processor call emit millions of updates (a join whose one
side changes every millisecond re-emits its matches each time), so a processor yields
its output in slices of at most :data:`FRAME_ROWS` rows, never one frame of all of it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar

__all__ = ["FRAME_ROWS", "slices"]

FRAME_ROWS = 65_536
"""Rows a processor's output frame holds at most."""

T = TypeVar("T")


def slices(rows: Sequence[T]) -> Iterator[Sequence[T]]:
    """``rows`` in consecutive slices of at most :data:`FRAME_ROWS`, in order (none if
    empty)."""
    size = FRAME_ROWS
    for start in range(0, len(rows), size):
        yield rows[start : start + size]
