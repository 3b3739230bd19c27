"""The replica engine: maintains a cluster's dataflows on one Spark session.

:class:`Engine` implements :class:`~dataflow_operator.runtime.service.ReplicaService`
(what the control API serves) and runs the replica's clock: each :meth:`Engine.step`
advances every dataflow to one logical time, in dependency order, and
:func:`~dataflow_operator.runtime.engine.loop.run_plan` loops it over a tick plan until it
ends or the replica expires (the frontier guard: no batch at or past the expiration).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pyspark.sql import SparkSession

from dataflow_operator.api.catalog import Catalog
from dataflow_operator.api.dataflow import DataflowKindField, DataflowSpec
from dataflow_operator.api.protocol import (
    DataflowReport,
    DesiredDataflow,
    DesiredDataflows,
    InstallResult,
    PeekResult,
    ReleaseFrontiers,
    ReplicaPhase,
    ReplicaReport,
)
from dataflow_operator.core.time import Timestamp
from dataflow_operator.logs import get_logger
from dataflow_operator.runtime.clock import ClockFile
from dataflow_operator.runtime.engine.config import EngineConfig, expired_message
from dataflow_operator.runtime.engine.drops import Drops
from dataflow_operator.runtime.engine.install import DataflowStarter, remove_state
from dataflow_operator.runtime.engine.layout import DataflowLayout
from dataflow_operator.runtime.engine.levels import dependency_order, step_levels, upstream_of
from dataflow_operator.runtime.engine.quiet import RUN
from dataflow_operator.runtime.engine.release import HOLDING, Installed, Releaser, release_all
from dataflow_operator.runtime.engine.running import BatchOutput, RunningDataflow
from dataflow_operator.runtime.errors import one_line
from dataflow_operator.runtime.service import (
    BatchListener,
    Changelog,
    NotAnIndex,
    NotReady,
    UnknownDataflow,
)
from dataflow_operator.runtime.sources.logs import HeldInput

__all__ = ["Engine", "dataflows_from"]

log = get_logger(__name__)

RECURSION_LOCAL_RELATION = "spark.sql.cteRecursionAnchorRowsLimitToConvertToLocalRelation"
CLOSE_TIMEOUT = 10.0
"""How long closing the engine waits for the dataflows' Spark work to stop."""


@dataclass
class _Entry:
    desired: DesiredDataflow
    running: RunningDataflow | None
    error: str | None = None


class Engine:
    """Maintains dataflows on Spark; see the module docstring."""

    def __init__(
        self,
        spark: SparkSession,
        config: EngineConfig,
        on_output: Callable[[BatchOutput], None] | None = None,
    ) -> None:
        self.spark = spark
        self.config = config
        self.on_output = on_output
        self.phase = ReplicaPhase.RUNNING  # Spark is up: it serves (``Starting`` is before)
        self._closed = False
        self.now: Timestamp | None = None
        self.expired_at: Timestamp | None = None
        self._entries: dict[str, _Entry] = {}
        self._order: list[str] = []
        self._lock = threading.RLock()
        self._step_lock = threading.Lock()
        self.drops = Drops()
        self.starter = DataflowStarter(spark, config, on_output)
        self._listeners: list[BatchListener] = []
        self.releaser = Releaser(own_cluster=config.release_upstream)
        spark.conf.set("spark.sql.streaming.pollingDelay", "50ms")
        # A recursion's iterations run as jobs (not local relations in the driver), so
        # cancelling its job group and future jobs ends even a divergent one.
        spark.conf.set(RECURSION_LOCAL_RELATION, "0")
        config.state.make_dirs()

    # --- ReplicaService -------------------------------------------------------------

    def ready(self) -> bool:
        """True while the replica runs (Spark is up, so it takes a desired set, reports
        and serves); not once it stops or expires. Readiness does not wait for a desired
        set: the operator sends its set when the control API answers and waits itself
        for the set's dataflows to hydrate (docs/operations.md)."""
        return self.phase is ReplicaPhase.RUNNING

    def apply(self, desired: DesiredDataflows) -> InstallResult:
        """Converge to ``desired``: install new, reinstall changed, drop removed.

        A drop returns at once: the dataflow's token is dropped (its jobs cancelled, its
        sources' marker written) and it is stopped in a thread of its own, reported as
        ``dropping`` until its last task has ended. A reinstall (or a name added again)
        waits for the old run to be gone, since both use the same checkpoint.

        A dataflow whose state was made for another spec (or that reads one whose output
        starts over) starts over: its old output is not retracted, so whoever holds it
        would hold both. That happens only when accepted — the dataflow is in the
        config's ``reset``, or it comes with a ``generation`` (a Dataflow object edited in
        Kubernetes) — and is logged; otherwise it is refused (a failed install whose error
        says how to accept it) and its state is kept.

        Raises :class:`~dataflow_operator.runtime.service.NotReady` once :meth:`close` has
        begun (a 503: its Spark session is stopping).
        """
        with self._lock:
            if self._closed:  # its Spark session is going: a set sent now is for the next
                raise NotReady("the replica is stopping: it takes no dataflows")
            wanted = {d.name: d for d in desired.dataflows}
            result = InstallResult()
            for name in [n for n in self._entries if n not in wanted]:
                self._drop(name)
                result.dropped.append(name)
            catalog = Catalog({name: d.spec for name, d in wanted.items()})
            restarted: set[str] = set()
            for name in dependency_order(catalog, wanted):
                entry = self._entries.get(name)
                upstream_restarted = bool(restarted & set(upstream_of(catalog, name)))
                if (
                    entry is not None
                    and entry.desired == wanted[name]
                    and entry.error is None
                    and not upstream_restarted
                ):
                    result.unchanged.append(name)
                    continue
                if entry is not None:
                    self._drop(name)
                self.drops.await_gone(name)  # the same checkpoint: the old run must be gone
                layout = self.starter.layout(name, wanted[name].spec)
                why = self._restart_reason(catalog, name, layout, restarted)
                if why is not None:
                    refusal = self._refused_restart(wanted[name], why)
                    if refusal is not None:
                        self._entries[name] = _Entry(wanted[name], None, refusal)
                        (result.reinstalled if entry is not None else result.installed).append(name)
                        result.failed[name] = refusal
                        continue
                    restarted.add(name)  # its output starts over: so do its readers
                if upstream_restarted:
                    # Its input starts over (a new upstream changelog): so does it.
                    remove_state(layout, keep=wanted[name].spec.sources)
                error = self._install(catalog, wanted[name])
                (result.reinstalled if entry is not None else result.installed).append(name)
                if error is not None:
                    result.failed[name] = error
            self._order = [n for n in dependency_order(catalog, wanted) if n in wanted]
        for name in result.dropped + result.reinstalled:
            self._notify(name)
        return result

    def _restart_reason(
        self, catalog: Catalog, name: str, layout: DataflowLayout, restarted: set[str]
    ) -> str | None:
        """Why the output of ``name`` would start over on its state; ``None``: it resumes."""
        spec = catalog.spec(name)
        if self.starter.spec_changed(layout, spec):
            return "its state was made for another spec (or runtime version)"
        upstream = sorted(restarted & set(upstream_of(catalog, name)))
        if upstream and layout.spec_file.exists():  # it emitted before
            return f"it reads {', '.join(upstream)}, whose output starts over"
        return None

    def _refused_restart(self, desired: DesiredDataflow, why: str) -> str | None:
        """The one line refusing ``desired``'s restart, or ``None`` (and a log) when it is
        accepted (see :meth:`apply`)."""
        name = desired.name
        if name in self.config.reset or desired.generation is not None:
            log.warning(
                "dataflow output starts over; what it emitted before is not retracted",
                dataflow=name,
                reason=why,
                generation=desired.generation,
                accepted="--reset" if name in self.config.reset else "a new generation",
            )
            return None
        log.error("dataflow output would start over; refused", dataflow=name, reason=why)
        return (
            f"its output would start over ({why}) without retracting what it emitted "
            f"before: accept that with --reset {name}, or use another --state-dir"
        )

    def report(self) -> ReplicaReport:
        """The replica and every dataflow's frontier, expiration, state and error."""
        with self._lock:
            reports = []
            for name in self._order:
                entry = self._entries.get(name)
                if entry is None:
                    continue  # dropped by close(): reported as dropping below
                if entry.running is not None:
                    report = entry.running.report().model_copy(
                        update={"sources": self.releaser.reports(name)}
                    )
                else:
                    report = DataflowReport(
                        name=name, generation=entry.desired.generation, last_error=entry.error
                    )
                reports.append(report)
            reports += [
                running.dropping_report()
                for name, running in self.drops.dropping().items()
                if name not in self._entries
            ]
            return ReplicaReport(
                start_time=self.config.start_time,
                expiration=self.config.expiration,
                phase=self.phase,
                dataflows=reports,
                shutdowns=self.drops.shutdowns.model(),
            )

    def peek(self, name: str) -> PeekResult:
        """An Index's current contents (the consolidation of its changelog)."""
        entry = self._entries.get(name)
        if entry is None:
            raise UnknownDataflow(name)
        if entry.desired.spec.kind is not DataflowKindField.INDEX or entry.running is None:
            raise NotAnIndex(name)
        running = entry.running
        upper = running.store.read_upper()
        at = (upper.upper - 1) if upper else self.config.start_time
        columns, rows = running.store.consolidated(at)
        if not columns and running.built is not None:
            columns = list(running.built.columns)
        return PeekResult(name=name, time=at, columns=columns, rows=rows)

    def changelog(self, name: str) -> Changelog:
        """A running dataflow's output changelog (what a subscriber reads)."""
        entry = self._entries.get(name)
        if entry is None or entry.running is None:
            raise UnknownDataflow(name)
        return Changelog(entry.running.store, entry.desired.spec.kind)

    def release(self, frontiers: ReleaseFrontiers) -> None:
        """Take the cluster's listing frontiers (``PUT /release``): from the next release
        on, files below them are released (see :mod:`.release`)."""
        self.releaser.cluster = {(s.dataflow, s.source): s.listed for s in frontiers.sources}
        self.releaser.changed()
        self.releaser.cluster_offsets = {
            (s.dataflow, s.source): {int(p): o for p, o in s.offsets.items()}
            for s in frontiers.sources
            if s.offsets
        }

    def add_batch_listener(self, listener: BatchListener) -> None:
        """Call ``listener(name)`` after each step's batches of dataflow ``name``."""
        self._listeners.append(listener)

    def _notify(self, name: str) -> None:
        for listener in self._listeners:
            try:
                listener(name)
            except Exception:
                log.exception("batch listener failed", dataflow=name)

    # --- the clock ------------------------------------------------------------------

    def step(self, time: Timestamp, *, complete: bool = True) -> None:
        """Advance every dataflow to ``time`` (upstream first) and wait for their output.

        ``complete``: each stateful dataflow's output is complete up to ``time`` when the
        step returns, at the cost of a second Spark batch (:meth:`RunningDataflow.settle`).
        Without it a step is at most one batch, and such a dataflow's frontier trails by
        one step (its timers fire in the next step's batch): what a clock that ticks every
        fraction of a second wants. That next batch runs even when nothing new came: a
        dataflow whose last batch held output back (:meth:`RunningDataflow.holding`) is
        given one more round of the clock. A dataflow with nothing to do runs no batch,
        complete step or not: its frontier moves with the clock up to the next update
        its state holds, and the step at or past that update's time runs its batch and
        settles it (:mod:`.quiet`). A dataflow's first step is always complete, so that
        it hydrates in it.

        Dataflows run side by side, level by level: each dataflow is given its time (its
        query's next batch starts on its own), then the step waits for them all; a
        dataflow that reads another's output is in a later level than the one it reads.

        Steps are serialized; :meth:`apply` and :meth:`report` stay responsive meanwhile
        (a dataflow dropped during a step just stops).
        """
        with self._step_lock:
            with self._lock:
                self.now = time
                work = [
                    (entry.running, self._clock_time(name, time))
                    for name in self._order
                    if (entry := self._entries.get(name)) is not None
                    and entry.running is not None
                    and not entry.running.failed
                ]
            for level in step_levels(work):
                stepped, settling = [], []
                for running, clock_time in level:
                    batch, settle = self._give_time(running, clock_time, complete=complete)
                    if batch:
                        stepped.append(running)
                        self.releaser.changed()
                    if settle:
                        settling.append(running)
                for running in stepped:
                    running.catch_up()
                settled = [running for running in settling if running.settle()]
                for running in settled:
                    running.catch_up()
                for running, _ in level:
                    self._notify(running.name)
            self.release_inputs()

    def next_due(self) -> Timestamp | None:
        """The earliest time at which a dataflow's state has an update due (a temporal
        filter's retraction, held output), as far as the idle checks have read: a wall
        clock wakes for it rather than at its next tick (one already past is no reason
        to wake: :meth:`TickPlan.times <dataflow_operator.runtime.clock.TickPlan.times>`)."""
        with self._lock:
            times = [
                due
                for entry in self._entries.values()
                if entry.running is not None and (due := entry.running.due_at()) is not None
            ]
        return min(times, default=None)

    def _give_time(
        self, running: RunningDataflow, clock_time: Timestamp | None, *, complete: bool
    ) -> tuple[bool, bool]:
        """Give one dataflow its step's time (see :meth:`step`); ``(batch, settle)``: whether
        it runs a batch the step waits for, and whether the step then settles it.

        A dataflow with nothing to do runs no batch (:mod:`.quiet`), on either clock: a
        simulated run walks the days nothing happens in without Spark."""
        first = running.status.as_of is None
        idle = RUN if clock_time is None else running.idle_step(clock_time)
        if complete and idle.settle:
            idle = RUN  # a complete step reaches its time: a batch at it, settled below
        if idle.upper is not None:
            running.advance_idle(idle.upper)  # nothing new: its frontier moves, no batch
            return False, False
        if idle.settle:  # nothing new: one more round at its last batch's time
            running.settle()
            return True, False
        # Held output gets its batch now (a complete step settles it below).
        held = not (complete or first) and running.holding()
        if clock_time is not None:
            running.begin(clock_time)
            running.stage_kafka(clock_time)
            ClockFile(running.settings.layout.clock).write(clock_time, another_round=held)
        else:
            running.hydration.wait(running.status.frontier)
            if held:
                running.settle()
            elif not (complete or first):
                return False, False  # between its refreshes: its clock stays, no batch
        return True, complete or first or idle.due  # a new dataflow hydrates in its first step

    def release_inputs(self, *, force: bool = False) -> None:
        """Compact the sources' ingested collections and release consumed input upstream
        (at most once a second, or every ten while nothing changed, unless ``force``);
        see :mod:`.release`."""
        if not self.releaser.due(force=force):
            return
        with self._lock:
            installed = [
                Installed(
                    name,
                    entry.desired.spec,
                    layout := self.starter.layout(name, entry.desired.spec),
                    entry.running.store
                    if entry.running is not None and layout.sink is None
                    else None,
                )
                for name, entry in self._entries.items()
            ]
        try:
            release_all(self.releaser, installed, force=force)
        except Exception:  # never stops the dataflows: retried at the next step
            log.exception("releasing source input failed; retrying")

    def held_inputs(self) -> list[tuple[str, str, HeldInput]]:
        """``(dataflow, source, input)`` for each changelog source holding back input at
        its dataflow's expiration: the replica must restart before it can read it."""
        with self._lock:
            running = [
                (name, entry.desired.spec, r)
                for name, entry in self._entries.items()
                if (r := entry.running) is not None
            ]
        held = []
        for name, spec, dataflow in running:
            for source in spec.sources:
                logs = dataflow.settings.layout.source_logs(source.name)
                if source.kind in HOLDING and (found := HeldInput.read(logs)) is not None:
                    held.append((name, source.name, found))
        return held

    def expire(self, now: Timestamp) -> str:
        """Stop emitting: mark the replica and its dataflows expired; the message."""
        expiration = self.config.expiration
        assert expiration is not None
        self.release_inputs(force=True)  # what was read is ingested: release it now
        with self._lock:
            self.phase = ReplicaPhase.EXPIRED
            self.expired_at = now
            for entry in self._entries.values():
                if entry.running is not None:
                    entry.running.status.expired = True
        message = expired_message(now, expiration)
        log.warning(message)
        return message

    def failures(self) -> dict[str, str]:
        """Dataflows that failed to install or whose query failed, with their error."""
        failed = {}
        for name, entry in self._entries.items():
            error = entry.error or (entry.running.status.last_error if entry.running else None)
            if error is not None:
                failed[name] = error
        return failed

    def all_failed(self) -> bool:
        """True when there are dataflows and every one of them failed."""
        return bool(self._entries) and len(self.failures()) == len(self._entries)

    def running(self, name: str) -> RunningDataflow | None:
        """The running dataflow ``name`` (for status and metrics)."""
        entry = self._entries.get(name)
        return entry.running if entry else None

    def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """Stop every query: drop them all at once, wait up to ``timeout`` for their work."""
        with self._lock:
            self._closed = True
            self.phase = self.phase if self.phase is ReplicaPhase.EXPIRED else ReplicaPhase.STOPPING
            for name in reversed(self._order):
                self._drop(name)
        self.drops.await_all(timeout)
        self.releaser.groups.close()  # the last consumer group commits, then the clients

    # --- installing -----------------------------------------------------------------

    def _drop(self, name: str) -> None:
        """Drop at once (token, marker, jobs); stop the rest in the background."""
        entry = self._entries.pop(name, None)
        self.releaser.forget(name)
        if entry is None or entry.running is None:
            log.info("dataflow dropped", dataflow=name)
            return
        self.drops.drop(entry.running)

    def _install(self, catalog: Catalog, desired: DesiredDataflow) -> str | None:
        name, spec = desired.name, desired.spec
        entry = _Entry(desired=desired, running=None)
        self._entries[name] = entry
        try:
            running = self.starter.start(catalog, desired, self._upstream)
        except Exception as error:
            entry.error = one_line(error)
        else:
            entry.running = running
            log.info("dataflow installed", dataflow=name, kind=spec.kind.value)
            return None
        log.error("dataflow not installed", dataflow=name, error=entry.error)
        return entry.error

    def _upstream(self, name: str) -> RunningDataflow | str:
        entry = self._entries.get(name)
        if entry is None:
            return "it is not installed"
        return entry.running or entry.error or "it failed to start"

    def _clock_time(self, name: str, time: Timestamp) -> Timestamp | None:
        """The time the dataflow's sources may advance to: ``time``, or its last refresh."""
        spec = self._entries[name].desired.spec
        if spec.refresh is None:
            return time
        return spec.refresh.schedule().round_down(time)


def dataflows_from(specs: Iterable[tuple[str, DataflowSpec]]) -> DesiredDataflows:
    """A desired set from ``(name, spec)`` pairs (for the local run and tests)."""
    return DesiredDataflows(
        dataflows=[DesiredDataflow(name=name, spec=spec) for name, spec in specs]
    )
