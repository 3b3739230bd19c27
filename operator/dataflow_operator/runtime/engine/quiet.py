"""Idle steps: a dataflow with nothing new moves its frontier without a Spark batch.

A batch with no new input would carry only the clock's time, so a step on either clock
(a simulated run's quiet days too) asks first (:meth:`IdleCheck.check`):

- a dataflow still hydrating, failed or dropped runs its batch;
- so does one whose sources have something new
  (:func:`~dataflow_operator.runtime.sources.quiet.quiet_upper`: new files, an upstream
  batch, a changelog producer's upper, a kafka source always), and a recomputed query
  with ``mz_now()`` (its result moves with the clock alone);
- one holding output back (:meth:`RunningDataflow.holding`: its last batch ran with the
  watermark of the batch before) with nothing new settles it: one more round at the
  time of its last batch, not a batch at a new time (which would hold back again) —
  except in a complete step (a simulated one, a run's last), which runs its batch and
  settles it;
- otherwise its output is complete up to what its sources would reach (the least of
  their uppers), except where its state holds updates for later: a stateful dataflow's
  registered timers (a temporal filter's retractions, a join's or a set operation's held
  output) are read from its checkpoint with Spark's state reader, once after each batch,
  but only once it has had nothing new for :data:`QUIET_AFTER` (until then it runs its
  batches as a busy dataflow does: input that comes often finds no state read in its
  way). The frontier moves up to the earliest of them without a batch; a step at or past
  it runs the batch and settles it, so the update comes out in that step. A wall clock
  steps at that time rather than at its next tick (:meth:`IdleCheck.due_at`).

Nothing a batch would emit is skipped: every update of a later batch is at a time at or
past the frontier moved to (new input is at or past its source's upper; a timer fires at
its own time, at or past the frontier). A changelog or an upstream dataflow's new input
starts a batch between steps, at the clock's time of the step before: the check looks
only at a dataflow whose latest planned batch is the last its sink wrote and Spark
committed, and runs the batch otherwise (the step's wait then covers the one in flight).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812 - Spark's convention

from dataflow_operator.core.time import Timestamp
from dataflow_operator.logs import get_logger
from dataflow_operator.runtime.engine.layout import last_batch, offsets_of
from dataflow_operator.runtime.errors import one_line
from dataflow_operator.runtime.sources.options import SourceOptions
from dataflow_operator.runtime.sources.quiet import quiet_upper
from dataflow_operator.runtime.storage import Location

__all__ = ["RUN", "IdleCheck", "Step", "next_timer"]

log = get_logger(__name__)

QUIET_AFTER = 2.0
"""How long (s) a stateful dataflow runs its batches as a busy one does after it last had
new input, before its timers are read (a Spark job) and it goes quiet."""
TIMER_STATE = "TimerState"
"""The type Spark's state metadata gives an operator's registered timers."""


@dataclass(frozen=True, slots=True)
class Step:
    """What a step does with one dataflow: ``upper`` set, move its frontier there without
    a batch; ``settle``, only complete its last batch (one more round at its time, when
    it holds output back and nothing is new); otherwise run its batch, and settle it too
    when ``due`` (a timer of its state falls due at the step's time)."""

    upper: int | None = None
    settle: bool = False
    due: bool = False


RUN = Step()
"""Run the batch (and settle it only as a complete step would)."""


def next_timer(spark: SparkSession, checkpoint: Location) -> int | None:
    """The earliest timer registered in the checkpoint's state as of its last committed
    batch (epoch ms), over every operator that has timers; ``None`` when there is none."""
    uri = checkpoint.uri
    times = []
    for operator in spark.read.format("state-metadata").load(uri).collect():
        properties = json.loads(operator.operatorProperties or "{}")
        variables = properties.get("stateVariables", [])
        if not any(v.get("stateVariableType") == TIMER_STATE for v in variables):
            continue
        earliest = (
            spark.read.format("statestore")
            .option("path", uri)
            .option("operatorId", int(operator.operatorId))
            .option("readRegisteredTimers", "true")
            .load()
            .agg(F.min("expiration_timestamp_ms"))
            .first()
        )
        if earliest is not None and earliest[0] is not None:
            times.append(int(earliest[0]))
    return min(times, default=None)


class IdleCheck:
    """One running dataflow's idle test; its timers read once per batch it ran."""

    def __init__(self, name: str, checkpoint: Location, sources: list[SourceOptions]) -> None:
        self.name = name
        self.checkpoint = checkpoint
        self.sources = sources
        self._timers: tuple[int, int | None] | None = None
        """``(batch, earliest timer)`` read once that batch was committed."""
        self._offsets: tuple[int, dict[int, dict[str, Any]]] | None = None
        """``(batch, each source's offset in it)``."""
        self._unreadable = False
        self._busy_at: float | None = None
        """When a check last found something new (or the first check ran)."""

    def check(
        self,
        spark: SparkSession,
        now: Timestamp,
        *,
        upper: int,
        batch: int,
        stateful: bool,
        holding: bool,
    ) -> Step:
        """The step at clock time ``now`` of a dataflow that may idle (see the module
        docstring for when it may), whose sink last wrote Spark's batch ``batch`` with the
        output's upper ``upper``, and that is ``holding`` output back."""
        if self._unreadable:
            return RUN  # its timers cannot be read: it runs every batch
        if self._busy_at is None:
            self._busy_at = time.monotonic()
        offsets = self._settled_offsets(batch)
        if offsets is None:
            return RUN  # a batch is in flight (or not committed yet): the step waits for it
        reach = []
        for options in self.sources:
            offset = offsets.get(options.index)
            found = None if offset is None else quiet_upper(options, offset, now)
            if found is None:
                self._busy_at = time.monotonic()
                return RUN
            reach.append(found)
        if holding:
            return Step(settle=True)
        target = min(reach, default=now + 1)
        if target <= upper or not stateful:
            return Step(upper=max(target, upper))
        if not self._timers_known(batch) and time.monotonic() - self._busy_at < QUIET_AFTER:
            return RUN  # busy a moment ago: more input is likely, reading the state is not
        timer = self._earliest_timer(spark, batch)
        if self._unreadable:
            return RUN
        if timer is not None and timer <= now:
            return Step(due=True)
        return Step(upper=target if timer is None else min(target, timer))

    def due_at(self) -> int | None:
        """The earliest timer of its state as last read (``None``: none, or not read):
        when an idle dataflow next has an update to emit."""
        return None if self._timers is None else self._timers[1]

    def _settled_offsets(self, batch: int) -> dict[int, dict[str, Any]] | None:
        """Each source's offset (by its index) in ``batch``, read once; ``None`` unless
        ``batch`` is both the latest batch Spark planned and the latest it committed."""
        if not last_batch(self.checkpoint) == batch == last_batch(self.checkpoint, "commits"):
            return None
        if self._offsets is None or self._offsets[0] != batch:
            _, sources = offsets_of(self.checkpoint, batch)
            self._offsets = (batch, {int(o.get("source", -1)): o for o in sources})
        return self._offsets[1]

    def _timers_known(self, batch: int) -> bool:
        return self._timers is not None and self._timers[0] == batch

    def _earliest_timer(self, spark: SparkSession, batch: int) -> int | None:
        """The earliest timer as of committed ``batch``, read once; ``None`` also when
        it cannot be read (then :attr:`_unreadable`, and it is not tried again)."""
        if self._timers is not None and self._timers[0] == batch:
            return self._timers[1]
        try:
            timer = next_timer(spark, self.checkpoint)
        except Exception as error:
            self._unreadable = True  # it runs a batch every step from now on
            log.warning(
                "the dataflow's timers cannot be read: it runs a batch every step",
                dataflow=self.name,
                error=one_line(error),
            )
            return None
        self._timers = (batch, timer)
        return timer
