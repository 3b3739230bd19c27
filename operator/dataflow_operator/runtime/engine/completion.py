"""Which batches of a stateful dataflow complete its output below their inputs' frontier.

A batch runs with the watermark of the batch before it: the inputs' frontier before it.
A stateful operator that holds updates until the watermark reaches their time emits
a batch's updates in the next batch, so the dataflow's output upper after a batch is at
most the watermark's successor, and completing a step takes a batch more (a settle).

An operator told the inputs' frontier *with* the batch
(:data:`~dataflow_operator.runtime.strategies.held.INPUT_FRONTIER`) emits every update
below it in the batch itself, and the upper is that frontier. That is right when nothing
is held below it that only a timer would emit (timers fire by the watermark, a batch
later, and only a bucket with input in the batch sees the frontier):

- in a new query's first batch: nothing is held from before;
- in a batch of a dataflow whose operators hold nothing but what is ahead of the
  frontier (joins, set operations, an aggregate over a join; not a temporal filter,
  whose retractions come due at times no input marks), while its inputs are in step
  (every source's upper is the frontier: no input is ahead of it, nothing is held past
  it) and the watermark has passed whatever an earlier batch held. Those held updates
  fire by their timers in this batch, after its rows: an operator whose output depends
  on the order it applies updates in takes what is held through a row's time with the
  row, first (:meth:`~dataflow_operator.runtime.strategies.held.HeldUpdates.take_through`).

Every other batch runs by the watermark. What any batch holds is below the inputs'
newest upper, which the watermark passes in the batch after the first one whose inputs
are in step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["BatchCompletion", "Completion"]


@dataclass(frozen=True, slots=True)
class BatchCompletion:
    """How one batch completes its dataflow's output."""

    inputs: int
    """The inputs' frontier with the batch (the least of the sources' uppers)."""
    upper: int
    """The output's upper after the batch."""
    told: bool
    """Whether the batch's tasks are told ``inputs`` (and emit everything below it)."""


class Completion:
    """Decides, batch after batch, how a stateful dataflow's batches complete.

    ``releases_at_frontier``: its operators hold nothing but what is ahead of the
    frontier when told it (no temporal filter)."""

    def __init__(self, *, releases_at_frontier: bool) -> None:
        self.releases_at_frontier = releases_at_frontier
        self.held_until: int | None = None
        """Below which time the last batch may have left updates held (unknown after a
        query's start, until its first batch)."""

    def of_batch(self, batch: int, uppers: Sequence[int], watermark: int) -> BatchCompletion:
        """Batch ``batch``'s completion, given its sources' uppers and its watermark."""
        inputs = min(uppers, default=0)
        ahead = max(uppers, default=0)
        drained = self.held_until is not None and watermark + 1 >= self.held_until
        told = batch == 0 or (self.releases_at_frontier and drained and ahead == inputs)
        self.held_until = ahead
        upper = inputs if told else min(inputs, watermark + 1)
        return BatchCompletion(inputs, upper, told)
