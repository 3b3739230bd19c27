"""One installed dataflow: its streaming query, its cancellation scope, its status.

Every dataflow's Spark work runs under its own job group and job tag (set in the thread
that starts the query; Spark's streaming thread inherits them), so dropping it stops its
query and cancels whatever jobs it still runs (design 2's seam).
"""

from __future__ import annotations

import threading
import time as wall
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession

from dataflow_operator.api.dataflow import MaintenanceStrategy
from dataflow_operator.api.protocol import DataflowReport
from dataflow_operator.core.time import Frontier, Timestamp
from dataflow_operator.logs import get_logger
from dataflow_operator.runtime.changelog_store import DIFF, TIME, ChangelogStore, consolidate
from dataflow_operator.runtime.clock import ClockFile
from dataflow_operator.runtime.engine.completion import BatchCompletion, Completion
from dataflow_operator.runtime.engine.kafka_staging import KafkaStaging
from dataflow_operator.runtime.engine.layout import DataflowLayout, offsets_of
from dataflow_operator.runtime.engine.query_conf import query_conf
from dataflow_operator.runtime.engine.quiet import RUN, IdleCheck, Step
from dataflow_operator.runtime.engine.sink import write_batch
from dataflow_operator.runtime.errors import is_data_error, one_line
from dataflow_operator.runtime.hydration.dataflow import DataflowHydration
from dataflow_operator.runtime.sources.options import SourceOptions
from dataflow_operator.runtime.strategies.build import BuiltDataflow
from dataflow_operator.runtime.strategies.general import Recompute
from dataflow_operator.runtime.strategies.held import INPUT_FRONTIER
from dataflow_operator.runtime.token import Token, TokenDropped, active_tasks

__all__ = ["BatchOutput", "DataflowSettings", "RunningDataflow"]

log = get_logger(__name__)

RETRIES = 2
"""Restarts of a query that failed for a reason other than its data."""
STOP_TIMEOUT = 60.0
"""How long a drop waits for the dataflow's last task before it gives up waiting."""
QUIET_PERIOD = 0.2
"""How long no task of a dropped dataflow may run before it counts as stopped."""
RECANCEL_PERIOD = 0.25
"""How often a drop cancels the dataflow's jobs again while some of its tasks still run."""
DROPPED_MARKER = "dropped"
"""The token's marker file, in the dataflow's state directory (its sources look for it)."""


@dataclass(frozen=True, slots=True)
class BatchOutput:
    """What one batch of a dataflow emitted, in time order."""

    dataflow: str
    batch: int
    upper: int
    columns: tuple[str, ...]
    updates: list[tuple[int, int, tuple[Any, ...]]]


@dataclass(frozen=True, slots=True)
class DataflowSettings:
    """What the engine decided for a dataflow when it installed it."""

    name: str
    kind: str
    generation: int | None
    expiration: Timestamp | None
    until: Frontier
    layout: DataflowLayout
    reads: tuple[str, ...] = ()
    """The dataflows whose output it reads (they step before it)."""


@dataclass
class _Status:
    frontier: Frontier = field(default_factory=Frontier.minimum)
    as_of: Timestamp | None = None
    state_rows: int = 0
    state_bytes: int = 0
    batches: int = 0
    last_error: str | None = None
    expired: bool = False


class RunningDataflow:
    """A dataflow's streaming query, started by :meth:`start`, advanced by :meth:`catch_up`."""

    def __init__(
        self,
        spark: SparkSession,
        settings: DataflowSettings,
        on_output: Callable[[BatchOutput], None] | None = None,
        *,
        state_partitions: int = 2,
    ) -> None:
        self.spark = spark
        self.state_partitions = state_partitions
        self.settings = settings
        self.store = ChangelogStore(settings.layout.changelog)
        self.on_output = on_output
        self.tag = f"dataflow-{settings.name}"
        self.query: Any = None
        self.built: BuiltDataflow | None = None
        self.status = _Status()
        self.hydration = DataflowHydration(settings.name)  # the dataflow's and its nodes'
        self.token = Token(self.tag, marker=settings.layout.root.child(DROPPED_MARKER))
        self._lock = threading.Lock()
        self._store_lock = threading.Lock()
        """Held while the store's upper is written: by a batch's sink (Spark's stream
        thread) and by a step moving the frontier without a batch (:meth:`advance_idle`)."""
        self._upper_is_inputs = False  # the last batch's: then a settle batch moves nothing
        self._completions: Completion | None = None  # a stateful query's batches' (see there)
        self._kafka: KafkaStaging | None = None
        self._idle: IdleCheck | None = None

    @property
    def name(self) -> str:
        """The dataflow's name."""
        return self.settings.name

    @property
    def failed(self) -> bool:
        """True once its query failed (its error is in the report)."""
        return self.status.last_error is not None

    # --- lifecycle ------------------------------------------------------------------

    def start(self, built: BuiltDataflow) -> None:
        """Start the streaming query under the dataflow's cancellation scope."""
        self.built = built
        self._kafka = KafkaStaging(built.kafka_sources) if built.kafka_sources else None
        sources = [SourceOptions(dict(source.options)) for source in built.sources]
        self._idle = IdleCheck(self.name, self.settings.layout.checkpoint, sources)
        if isinstance(built.transform, Recompute):
            built.transform.token = self.token
        recorded = self.store.read_upper()
        if recorded is not None:
            self.status.frontier = Frontier.at(recorded.upper)
        self._start_query(built)

    def _start_query(self, built: BuiltDataflow) -> None:
        # What a restarted query's operators hold is unknown until its first batch.
        self._completions = (
            Completion(releases_at_frontier=built.releases_at_frontier) if built.stateful else None
        )
        # The query clones the session's settings when it starts: these are for it only.
        conf = query_conf(self.settings.layout.checkpoint, self.state_partitions)
        saved = {key: self.spark.conf.get(key, None) for key in conf}
        try:
            for key, value in conf.items():
                self.spark.conf.set(key, value)
            writer = (
                built.frame.writeStream.queryName(self.tag)
                .foreachBatch(self._batch)
                .option("checkpointLocation", self.settings.layout.checkpoint.uri)
            )
            with self.token.scope(self.spark, f"dataflow {self.name}"):
                self.query = writer.start()
        finally:
            for key, previous in saved.items():
                if previous is None:
                    self.spark.conf.unset(key)
                else:
                    self.spark.conf.set(key, previous)

    def stage_kafka(self, step: Timestamp) -> None:
        """Have the executors read its kafka sources' batches for clock time ``step``
        (before the clock moves: see :mod:`.kafka_staging`)."""
        if self._kafka is None or self.query is None or self.failed or self.token.dropped:
            return
        self._kafka.stage(self.spark, self.settings.layout.checkpoint, self.token, step)

    def begin(self, time: Timestamp) -> None:
        """Note the first time this run processes (the snapshot time, ``as_of``)."""
        if self.status.as_of is None:
            self.status.as_of = time
            self.hydration.begin(self.query, Frontier.at(time), [self.token.group])

    def catch_up(self) -> None:
        """Block until the query has processed everything its sources offer now."""
        if self.query is None or self.failed or self.token.dropped:
            return
        clock = ClockFile(self.settings.layout.clock)
        for attempt in range(RETRIES + 1):
            try:
                with clock.poking():  # its readers may be waiting for the clock
                    self.query.processAllAvailable()
                break
            except Exception as error:
                message = one_line(error)
                if self.token.dropped:
                    self.fail(message)  # the drop's own error: not a failure
                    return
                if attempt == RETRIES or is_data_error(error) or self.built is None:
                    self.fail(message)
                    break
                # A worker that did not start, a lost connection: the checkpoint makes a
                # restart safe (the batch is redone, its output written once).
                log.warning(
                    "dataflow query failed; restarting it", dataflow=self.name, error=message
                )
                self._stop_query()
                self._start_query(self.built)
        self._read_progress()

    def holding(self) -> bool:
        """True when its last batch left its output below its inputs' frontier: complete
        updates (a just-read row, a due timer) wait for one more batch, which must come
        even when no input moves (a changelog source without new files)."""
        if self.built is None or not self.built.stateful or self.failed or self.token.dropped:
            return False
        return not self._upper_is_inputs

    def idle_step(self, now: Timestamp) -> Step:
        """What a step at clock time ``now`` does with it (see :mod:`.quiet`): move its
        frontier without a batch when nothing new can come out of one."""
        built, idle = self.built, self._idle
        if (
            built is None
            or idle is None
            or not built.may_idle
            or self.status.batches == 0  # none yet in this run: it hydrates first
            or self.failed
            or self.token.dropped
        ):
            return RUN
        recorded = self.store.read_upper()
        if recorded is None:
            return RUN
        return idle.check(
            self.spark,
            now,
            upper=recorded.upper,
            batch=recorded.batch,
            stateful=built.stateful,
            holding=self.holding(),
        )

    def due_at(self) -> Timestamp | None:
        """When its state next has an update to emit, as its idle check last read it
        (``None``: nothing known; see :mod:`.quiet`)."""
        return None if self._idle is None else self._idle.due_at()

    def advance_idle(self, upper: int) -> None:
        """Its output is complete below ``upper`` without a batch (see :mod:`.quiet`)."""
        with self._store_lock:
            recorded = self.store.read_upper()
            if recorded is None or upper <= recorded.upper:
                return
            self.store.write_upper(recorded.batch, upper)
        with self._lock:
            self.status.frontier = Frontier.at(max(upper, self.status.frontier.lower or 0))
            self.hydration.observe_frontier(self.status.frontier, self.query)

    def settle(self) -> bool:
        """Ask for the batch that completes the output up to the time of the last one;
        True when there is one to :meth:`catch_up` with.

        A batch runs with the watermark of the batch before it, so a stateful dataflow's
        timers up to the new time (a temporal filter's retractions, held join output)
        fire only in the next batch. This asks for it now: one more round of the clock at
        the same time, a batch with nothing new but the heartbeat. None is needed when
        the output's upper is the inputs' frontier already, as after a new query's first
        batch or a join's batch whose inputs are in step (:mod:`.completion`): another
        batch could not move it.
        """
        if not self.holding():
            return False
        ClockFile(self.settings.layout.clock).next_round()
        return True

    def fail(self, message: str) -> None:
        """Record the dataflow's error; it stops, the others keep running.

        An error caused by the dataflow's own drop is not a failure (and no error log).
        """
        self.token.log_failure("dataflow failed", dataflow=self.name, error=message)
        if not self.token.dropped:
            self.status.last_error = message

    def stop(self, timeout: float = STOP_TIMEOUT) -> bool:
        """Drop the token, stop the query, wait for its tasks; False if some outlived ``timeout``.

        Blocks: the engine calls it in a thread of its own.
        """
        deadline = wall.monotonic() + timeout
        query = self.query
        run_id = str(query.runId) if query is not None else None
        self.token.drop()  # at once: its sources stop, its loops and errors know
        self.hydration.stop()
        if self._kafka is not None:
            # in the background: closing a Kafka client may wait on its broker (one just
            # restarted, or out of reach), and a drop must not
            closing = threading.Thread(
                target=self._kafka.close, name=f"kafka-close-{self.name}", daemon=True
            )
            closing.start()
        # query.stop() marks the query terminated, then waits for its thread: only then
        # are its jobs cancelled, so Spark sees their failure as the stop's, not an error.
        stopping = threading.Thread(target=self._stop_query, name=f"stop-{self.name}")
        stopping.start()
        while query is not None and query.isActive and wall.monotonic() < deadline:
            wall.sleep(0.01)
        groups = [self.token.group] if run_id is None else [self.token.group, run_id]
        self._cancel(run_id)
        cancelled_at = wall.monotonic()
        quiet_since: float | None = None
        while wall.monotonic() < deadline:
            # Stopped once nothing ran for a while. Cancelling a group's future jobs misses
            # a shuffle stage submitted at the same moment (adaptive execution submits
            # them from a thread of its own), and its batch would wait for it: cancel
            # again for as long as some task runs.
            if stopping.is_alive() or active_tasks(self.spark, groups):
                quiet_since = None
                if wall.monotonic() - cancelled_at >= RECANCEL_PERIOD:
                    self._cancel(run_id)
                    cancelled_at = wall.monotonic()
            elif quiet_since is None:
                quiet_since = wall.monotonic()
            elif wall.monotonic() - quiet_since >= QUIET_PERIOD:
                return True
            wall.sleep(0.02)
        return False

    def _cancel(self, run_id: str | None) -> None:
        """Cancel the jobs of the token (its group and tag) and of the query's run."""
        self.token.drop(self.spark)
        if run_id is not None:
            Token.cancel(self.spark, run_id)  # the streaming query's own job group

    def _stop_query(self) -> None:
        if self.query is None:
            return
        try:
            self.query.stop()
        except Exception as error:
            log.debug("stop", dataflow=self.name, error=one_line(error))
        finally:
            self.query = None

    # --- the sink -------------------------------------------------------------------

    def _batch(self, frame: DataFrame, batch: int) -> None:
        """The sink; once dropped, its failure is the drop's (:class:`TokenDropped`)."""
        try:
            self._sink(frame, batch)
        except Exception as error:
            if self.token.dropped:
                log.debug("batch ended by the drop", dataflow=self.name, error=one_line(error))
                raise TokenDropped(self.tag) from None
            raise

    def _completion(self, batch: int) -> BatchCompletion:
        """The inputs' frontier with batch ``batch``, the output's upper after it, and
        whether the batch's tasks are told that frontier (see :mod:`.completion`)."""
        metadata, sources = offsets_of(self.settings.layout.checkpoint, batch)
        uppers = [int(s["upper"]) for s in sources if "upper" in s]
        if self._completions is None:  # not stateful: every update comes in its batch
            inputs = min(uppers, default=0)
            return BatchCompletion(inputs, inputs, told=False)
        watermark = int(str(metadata.get("batchWatermarkMs", 0)))
        return self._completions.of_batch(batch, uppers, watermark)

    def _sink(self, frame: DataFrame, batch: int) -> None:
        """Called by Spark for every batch: persist the updates and the new upper.

        A batch whose updates nobody needs in the driver (no Subscribe output, no
        driver-side transform) is written by the executors (:mod:`.sink`).
        """
        completion = self._completion(batch)
        upper = completion.upper
        self._upper_is_inputs = upper >= completion.inputs
        # A batch complete below its inputs' frontier: its tasks learn it (see
        # strategies.held). Set on this thread, the one that runs the batch's jobs.
        if self._completions is not None:
            told = str(completion.inputs) if completion.told else ""
            self.spark.sparkContext.setLocalProperty(INPUT_FRONTIER, told)
        until = self.settings.until.lower
        built = self.built
        if built is not None and built.transform is None and self.on_output is None:
            write_batch(frame, self.store, batch, until)
            with self._store_lock:
                self.store.write_upper(batch, upper)
            self._advanced(upper)
            return
        table = frame.toArrow()
        if built is not None and built.transform is not None:
            table = built.transform(table, batch)
        table = consolidate(table)
        if until is not None and table.num_rows:
            table = table.filter(pc.less(table[TIME], until))  # never emit at/past until
        previous = self.store.read_upper()
        with self._store_lock:
            self.store.write(batch, table, upper)
        self._advanced(upper)
        if previous is not None and batch <= previous.batch:
            return  # a batch replayed after a crash: its output was emitted already
        if self.on_output is not None and built is not None:
            columns = built.columns
            rows = table.to_pylist()
            updates = sorted(
                ((int(r[TIME]), int(r[DIFF]), tuple(r[c] for c in columns)) for r in rows),
                key=lambda u: (u[0], u[1]),
            )
            self.on_output(BatchOutput(self.name, batch, upper, columns, updates))

    def _advanced(self, upper: int) -> None:
        """The status after a batch completed up to ``upper``."""
        with self._lock:
            self.status.frontier = Frontier.at(max(upper, self.status.frontier.lower or 0))
            self.status.batches += 1
            self.hydration.observe_frontier(self.status.frontier, self.query)

    # --- status ---------------------------------------------------------------------

    def _read_progress(self) -> None:
        progress = self.query.lastProgress if self.query is not None else None
        if not progress:
            return
        rows = bytes_ = 0
        for operator in progress.get("stateOperators", []):
            rows += int(operator.get("numRowsTotal", 0))
            bytes_ += int(operator.get("memoryUsedBytes", 0))
        self.status.state_rows, self.status.state_bytes = rows, bytes_

    def state_metrics(self) -> list[dict[str, Any]]:
        """The state operators of the last progress, as Spark reports them."""
        progress = self.query.lastProgress if self.query is not None else None
        return list(progress.get("stateOperators", [])) if progress else []

    def _strategy(self) -> MaintenanceStrategy | None:
        if self.built is None:
            return None
        if self.built.recompute_reason is None:
            return MaintenanceStrategy.INCREMENTAL
        return MaintenanceStrategy.RECOMPUTE

    def dropping_report(self) -> DataflowReport:
        """The report of a dropped dataflow whose work is still stopping (no Spark calls)."""
        return DataflowReport(
            name=self.name,
            generation=self.settings.generation,
            frontier=self.status.frontier.elements(),
            expiration=self.settings.expiration,
            until=self.settings.until.elements(),
            dropping=True,
        )

    def report(self) -> DataflowReport:
        """The dataflow's report for the control API and the status file."""
        status = self.status
        hydration = self.hydration.status()
        return DataflowReport(
            name=self.name,
            generation=self.settings.generation,
            frontier=status.frontier.elements(),
            as_of=[] if status.as_of is None else [status.as_of],
            expiration=self.settings.expiration,
            until=self.settings.until.elements(),
            hydrated=hydration.hydrated,
            hydration_time_ms=hydration.hydration_time_ms,
            nodes=list(hydration.nodes),
            strategy=self._strategy(),
            strategy_reason=None if self.built is None else self.built.recompute_reason,
            state_rows=status.state_rows,
            state_bytes=status.state_bytes,
            expired=status.expired,
            last_error=status.last_error,
        )
