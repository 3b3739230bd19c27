"""The replica engine: maintains a cluster's dataflows on one Spark session.

:class:`Engine` implements :class:`~dataflow_operator.runtime.service.ReplicaService`
(what the control API serves) and runs the replica's clock: each :meth:`Engine.step`
advances every dataflow to one logical time, in dependency order, and
:meth:`Engine.run` loops over a :class:`~dataflow_operator.runtime.engine.clock.TickPlan` until
it ends or the replica expires (the frontier guard: no batch at or past the expiration).
"""

from __future__ import annotations

import json
import threading
import time as wall
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from dataflow_operator.api.catalog import Catalog
from dataflow_operator.api.dataflow import DataflowKindField, DataflowSpec, Source
from dataflow_operator.api.injection import EXIT_EXPIRED, EXIT_FAILED, EXIT_OK
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
from dataflow_operator.core.durations import Duration
from dataflow_operator.core.errors import DomainError, InvalidSpec, UnknownSource
from dataflow_operator.core.expiration import replica_expiration
from dataflow_operator.core.time import Frontier, Timestamp, format_timestamp
from dataflow_operator.logs import get_logger
from dataflow_operator.runtime.engine.clock import ClockFile, TickPlan
from dataflow_operator.runtime.engine.expiry import expiration_of
from dataflow_operator.runtime.engine.layout import DataflowLayout, last_offsets
from dataflow_operator.runtime.engine.release import (
    Releaser,
    SourceReader,
    committed_offsets,
    compact_output,
)
from dataflow_operator.runtime.engine.running import (
    DROPPED_MARKER,
    BatchOutput,
    DataflowSettings,
    RunningDataflow,
)
from dataflow_operator.runtime.errors import one_line
from dataflow_operator.runtime.serve.metrics import ShutdownHistogram
from dataflow_operator.runtime.service import (
    BatchListener,
    Changelog,
    NotAnIndex,
    UnknownDataflow,
)
from dataflow_operator.runtime.sources.ingested import IngestedCollection
from dataflow_operator.runtime.sources.reader import HELD_FILE, INGESTED_DIR, HeldInput
from dataflow_operator.runtime.storage import Location
from dataflow_operator.runtime.strategies.build import SourceInput, Unsupported, build_dataflow

__all__ = ["Engine", "EngineConfig", "dataflows_from", "expired_message", "write_status"]

log = get_logger(__name__)

KAFKA_PROVIDER = "org.apache.spark.sql.kafka010.KafkaSourceProvider"
RECURSION_LOCAL_RELATION = "spark.sql.cteRecursionAnchorRowsLimitToConvertToLocalRelation"
SOURCE_FILE = "source.json"
"""The source's settings its logs were made with (in its log directory)."""
CLOSE_TIMEOUT = 10.0
"""How long closing the engine waits for the dataflows' Spark work to stop."""


def expired_message(now: Timestamp, expiration: Timestamp) -> str:
    """The exact line the runtime prints when it stops at its expiration."""
    return (
        f"replica expired. now: {now} ({format_timestamp(now)}), "
        f"expiration: {expiration} ({format_timestamp(expiration)})"
    )


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """How the replica runs: where its state lives, when it started, when it expires."""

    state_dir: Location | Path | str
    """The replica's state location: a path, ``file://`` or object-store URI."""
    start_time: Timestamp
    expiration_offset: Duration | None = None
    state_partitions: int = 2
    """Partitions of a new dataflow's state (a checkpoint keeps the number it began with)."""
    spark_log_level: str = "ERROR"
    """Unused since shutdowns no longer mute Spark (quiet per dataflow token); kept for callers."""
    release_upstream: bool = False
    """Release consumed source files (``cleanSource``): only a replica that is its own
    cluster may (a local run); see :mod:`.release`."""

    @property
    def expiration(self) -> Timestamp | None:
        """The replica's expiration (``None``: never)."""
        return replica_expiration(self.start_time, self.expiration_offset)

    @property
    def state(self) -> Location:
        """The state location, every pod of the replica reaches it."""
        return Location.of(self.state_dir)


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
        self.phase = ReplicaPhase.STARTING
        self.now: Timestamp | None = None
        self.expired_at: Timestamp | None = None
        self._entries: dict[str, _Entry] = {}
        self._order: list[str] = []
        self._applied = False
        self._lock = threading.RLock()
        self._step_lock = threading.Lock()
        self._drops_lock = threading.Lock()
        self._dropping: dict[str, tuple[RunningDataflow, threading.Event]] = {}
        self.shutdowns = ShutdownHistogram()
        self._listeners: list[BatchListener] = []
        self.releaser = Releaser(own_cluster=config.release_upstream)
        spark.conf.set("spark.sql.streaming.pollingDelay", "50ms")
        # A recursion's iterations run as jobs (not local relations in the driver), so
        # cancelling its job group and future jobs ends even a divergent one.
        spark.conf.set(RECURSION_LOCAL_RELATION, "0")
        self.state = config.state
        self.state.make_dirs()

    # --- ReplicaService -------------------------------------------------------------

    def ready(self) -> bool:
        """True once a desired set has been applied."""
        return self._applied

    def apply(self, desired: DesiredDataflows) -> InstallResult:
        """Converge to ``desired``: install new, reinstall changed, drop removed.

        A drop returns at once: the dataflow's token is dropped (its jobs cancelled, its
        sources' marker written) and it is stopped in a thread of its own, reported as
        ``dropping`` until its last task has ended. A reinstall (or a name added again)
        waits for the old run to be gone, since both use the same checkpoint.
        """
        with self._lock:
            wanted = {d.name: d for d in desired.dataflows}
            result = InstallResult()
            for name in [n for n in self._entries if n not in wanted]:
                self._drop(name)
                result.dropped.append(name)
            catalog = Catalog({name: d.spec for name, d in wanted.items()})
            restarted: set[str] = set()
            for name in self._dependency_order(catalog, wanted):
                entry = self._entries.get(name)
                upstream_restarted = bool(restarted & set(self._reads(catalog, name)))
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
                self._await_drop(name)  # the same checkpoint: the old run must be gone
                layout = self._layout(name, wanted[name].spec)
                if upstream_restarted or self._spec_changed(layout, wanted[name].spec):
                    restarted.add(name)  # its output starts over: so do its readers
                if upstream_restarted:
                    # Its input starts over (a new upstream changelog): so does it.
                    _remove(layout, keep=wanted[name].spec.sources)
                error = self._install(catalog, wanted[name])
                (result.reinstalled if entry is not None else result.installed).append(name)
                if error is not None:
                    result.failed[name] = error
            self._order = [n for n in self._dependency_order(catalog, wanted) if n in wanted]
            self._applied = True
            if self.phase is ReplicaPhase.STARTING:
                self.phase = ReplicaPhase.RUNNING
        for name in result.dropped + result.reinstalled:
            self._notify(name)
        return result

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
            with self._drops_lock:
                dropping = [r for n, (r, _) in self._dropping.items() if n not in self._entries]
            reports += [running.dropping_report() for running in dropping]
            return ReplicaReport(
                start_time=self.config.start_time,
                expiration=self.config.expiration,
                phase=self.phase,
                dataflows=reports,
                shutdowns=self.shutdowns.model(),
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
        Without it a step is one batch, and such a dataflow's frontier trails by one step
        (its timers fire in the next step's batch, with the next input): what a clock that
        ticks every fraction of a second wants. A dataflow's first step is always
        complete, so that it hydrates in it.

        Steps are serialized; :meth:`apply` and :meth:`report` stay responsive meanwhile
        (a dataflow dropped during a step just stops).
        """
        with self._step_lock:
            with self._lock:
                self.now = time
                work = [
                    (name, entry.running, self._clock_time(name, time))
                    for name in self._order
                    if (entry := self._entries.get(name)) is not None
                    and entry.running is not None
                    and not entry.running.failed
                ]
            for _, running, clock_time in work:
                first = running.status.as_of is None
                if clock_time is not None:
                    running.begin(clock_time)
                    ClockFile(running.settings.layout.clock).write(clock_time)
                running.catch_up()
                if complete or first:  # a new dataflow hydrates in its first step
                    running.settle()
                self._notify(running.name)
            self.release_inputs()

    def release_inputs(self, *, force: bool = False) -> None:
        """Compact the sources' ingested collections and release consumed input upstream
        (at most once a second unless ``force``); see :mod:`.release`."""
        if not self.releaser.due(force=force):
            return
        with self._lock:
            readers = [
                SourceReader(
                    dataflow=name,
                    source=source,
                    index=index,
                    logs=(layout := self._layout(name, entry.desired.spec)).source_logs(
                        source.name
                    ),
                    checkpoint=layout.checkpoint,
                )
                for name, entry in self._entries.items()
                for index, source in enumerate(entry.desired.spec.sources)
            ]
            outputs = [
                (entry.running.store, self._downstream(name))
                for name, entry in self._entries.items()
                if entry.running is not None and entry.running.settings.layout.sink is None
            ]
        try:
            self.releaser.step(readers, force=force)
            for store, downstream in outputs:
                compact_output(store, downstream)
        except Exception:  # never stops the dataflows: retried at the next step
            log.exception("releasing source input failed; retrying")

    def _downstream(self, upstream: str) -> list[int]:
        """The batches of ``upstream``'s changelog each dataflow reading it has committed."""
        positions = []
        for name, entry in self._entries.items():
            for index, source in enumerate(entry.desired.spec.sources):
                if source.dataflow is not None and source.dataflow.name == upstream:
                    checkpoint = self._layout(name, entry.desired.spec).checkpoint
                    committed = committed_offsets(checkpoint).get(index)
                    positions.append(-1 if committed is None else committed.seq)
        return positions

    def run(
        self,
        plan: TickPlan,
        stop: threading.Event | None = None,
        after_batch: Callable[[Engine], None] | None = None,
    ) -> int:
        """Run batches at the plan's times; returns an exit code.

        Simulated steps are complete; on the wall clock a step is one Spark batch (see
        :meth:`step`), and a plan that ends completes its output at its last time.
        Stops with :data:`~dataflow_operator.api.injection.EXIT_EXPIRED` (and the
        expiration message in the log) before the first batch at or past the replica's
        expiration: the write frontier never passes it.
        """
        expiration = self.config.expiration
        last: Timestamp | None = None
        for time in plan.times():
            if stop is not None and stop.is_set():
                last = None
                break
            if expiration is not None and time >= expiration:
                self.expire(time)
                if after_batch is not None:
                    after_batch(self)
                return EXIT_EXPIRED
            self.step(time, complete=plan.simulated)
            last = time
            held = self.held_inputs() if expiration is not None else []
            if held:
                for dataflow, source, input_ in held:
                    log.warning(
                        "input at or past the expiration held back; restarting instead",
                        dataflow=dataflow,
                        source=source,
                        file=input_.file,
                        time=format_timestamp(input_.time),
                        expiration=format_timestamp(input_.expiration),
                    )
                self.expire(time)
                if after_batch is not None:
                    after_batch(self)
                return EXIT_EXPIRED
            if after_batch is not None:
                after_batch(self)
            if self._entries and len(self.failures()) == len(self._entries):
                log.error("every dataflow failed; stopping")
                last = None
                break
        if last is not None and not plan.simulated:
            self.step(last)  # the plan's end: the output complete up to its last time
            if after_batch is not None:
                after_batch(self)
        self.release_inputs(force=True)
        return EXIT_FAILED if self.failures() else EXIT_OK

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
                if source.changelog is not None and (found := HeldInput.read(logs)) is not None:
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

    def running(self, name: str) -> RunningDataflow | None:
        """The running dataflow ``name`` (for status and metrics)."""
        entry = self._entries.get(name)
        return entry.running if entry else None

    def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """Stop every query: drop them all at once, wait up to ``timeout`` for their work."""
        with self._lock:
            self.phase = self.phase if self.phase is ReplicaPhase.EXPIRED else ReplicaPhase.STOPPING
            for name in reversed(self._order):
                self._drop(name)
        with self._drops_lock:
            waiting = [done for _, done in self._dropping.values()]
        deadline = wall.monotonic() + timeout
        for done in waiting:
            done.wait(max(0.0, deadline - wall.monotonic()))

    # --- installing -----------------------------------------------------------------

    def _dependency_order(self, catalog: Catalog, wanted: dict[str, DesiredDataflow]) -> list[str]:
        order: list[str] = []
        for name in sorted(wanted):
            try:
                chain = [*catalog.upstream(name), name]
            except DomainError:
                chain = [name]
            order.extend(n for n in chain if n not in order)
        return order

    @staticmethod
    def _reads(catalog: Catalog, name: str) -> list[str]:
        try:
            return catalog.upstream(name)
        except DomainError:
            return []

    def _drop(self, name: str) -> None:
        """Drop at once (token, marker, jobs); stop the rest in the background."""
        entry = self._entries.pop(name, None)
        self.releaser.forget(name)
        if entry is None or entry.running is None:
            log.info("dataflow dropped", dataflow=name)
            return
        running = entry.running
        running.token.drop()  # at once; its jobs are cancelled once its query is stopping
        done = threading.Event()
        with self._drops_lock:
            self._dropping[name] = (running, done)
        threading.Thread(
            target=self._stop_dropped, args=(name, running, done), name=f"drop-{name}", daemon=True
        ).start()

    def _stop_dropped(self, name: str, running: RunningDataflow, done: threading.Event) -> None:
        try:
            complete = running.stop()
        except Exception as error:  # never leave it "dropping" forever
            complete = False
            log.debug("stop", dataflow=name, error=one_line(error))
        dropped_at = running.token.dropped_at or wall.monotonic()
        seconds = wall.monotonic() - dropped_at
        self.shutdowns.observe(seconds)
        with self._drops_lock:
            if self._dropping.get(name, (None,))[0] is running:
                del self._dropping[name]
        done.set()
        if complete:
            log.info("dataflow dropped", dataflow=name, seconds=round(seconds, 3))
        else:
            log.warning("dataflow dropped; some of its tasks outlived the wait", dataflow=name)

    def _await_drop(self, name: str) -> None:
        with self._drops_lock:
            dropping = self._dropping.get(name)
        if dropping is not None:
            dropping[1].wait()

    def _install(self, catalog: Catalog, desired: DesiredDataflow) -> str | None:
        name, spec = desired.name, desired.spec
        entry = _Entry(desired=desired, running=None)
        self._entries[name] = entry
        try:
            running = self._start(catalog, desired)
        except (DomainError, OSError) as error:
            entry.error = one_line(error)
        except Exception as error:
            entry.error = one_line(error)
        else:
            entry.running = running
            log.info("dataflow installed", dataflow=name, kind=spec.kind.value)
            return None
        log.error("dataflow not installed", dataflow=name, error=entry.error)
        return entry.error

    def _layout(self, name: str, spec: DataflowSpec) -> DataflowLayout:
        sink = Location.of(spec.sink.path) if spec.sink is not None else None
        return DataflowLayout.of(self.state, name, sink)

    def _start(self, catalog: Catalog, desired: DesiredDataflow) -> RunningDataflow:
        name, spec = desired.name, desired.spec
        for problem in catalog.problems(name):
            raise problem.error
        layout = self._layout(name, spec)
        self._reset_if_changed(layout, spec)
        # Input a previous run held back at its expiration is part of the inputs' upper
        # (the expiration's last rule): this run reads it instead of stopping again.
        inputs_upper = self.config.start_time
        for source in spec.sources:
            if source.changelog is not None:
                logs = layout.source_logs(source.name)
                held = HeldInput.read(logs)
                if held is not None:
                    inputs_upper = max(inputs_upper, held.time + 1)
                    logs.child(HELD_FILE).delete()
        expiration, until = expiration_of(
            catalog, name, self.config.expiration, Frontier.at(inputs_upper)
        )
        previous = last_offsets(layout.checkpoint)
        previous_until = None
        if previous is not None and previous[1]:
            recorded = int(previous[1][0].get("until", -1))
            previous_until = None if recorded < 0 else recorded
        inputs = [
            self._source_input(name, layout, index, source, until)
            for index, source in enumerate(spec.sources)
        ]
        marker = {"dropped_marker": layout.root.child(DROPPED_MARKER).uri}  # sources stop on it
        inputs = [SourceInput(i.name, i.data_ddl, {**i.options, **marker}) for i in inputs]
        built = build_dataflow(
            self.spark,
            spec.sql,
            inputs,
            until.lower,
            previous_until,
            work_dir=layout.work("general"),
        )
        settings = DataflowSettings(
            name=name,
            kind=spec.kind.value,
            generation=desired.generation,
            expiration=expiration,
            until=until,
            layout=layout,
        )
        running = RunningDataflow(
            self.spark,
            settings,
            self.on_output if spec.kind is DataflowKindField.SUBSCRIBE else None,
            state_partitions=self.config.state_partitions,
        )
        running.start(built)
        return running

    @staticmethod
    def _spec_changed(layout: DataflowLayout, spec: DataflowSpec) -> bool:
        """True when the state on disk was made for another spec (and will be reset)."""
        recorded = layout.spec_file.read_text_or_none()
        return recorded is not None and recorded != spec.model_dump_json(by_alias=True)

    def _reset_if_changed(self, layout: DataflowLayout, spec: DataflowSpec) -> None:
        """A changed spec starts over: its old checkpoint and changelog are for another query."""
        fingerprint = spec.model_dump_json(by_alias=True)
        recorded = layout.spec_file.read_text_or_none()
        if recorded == fingerprint:
            return
        if recorded is not None:
            _remove(layout, keep=spec.sources)
        layout.root.make_dirs()
        layout.spec_file.write_text(fingerprint)

    def _source_input(
        self, dataflow: str, layout: DataflowLayout, index: int, source: Source, until: Frontier
    ) -> SourceInput:
        expiration = str(-1 if until.lower is None else until.lower)
        logs = layout.source_logs(source.name)
        logs.child(SOURCE_FILE).write_text(source.model_dump_json(by_alias=True))
        options: dict[str, str] = {
            "log_dir": logs.uri,
            "source_index": str(index),
            "until": expiration,  # build_dataflow clears it when nothing is ever replayed
            "expiration": expiration,
            "clock": layout.clock.uri,
        }
        where = f'source "{source.name}"'
        if source.dataflow is not None:
            upstream = self._entries.get(source.dataflow.name)
            if upstream is None or upstream.running is None or upstream.running.built is None:
                reason = upstream.error if upstream is not None else "it is not installed"
                raise UnknownSource(
                    f'{where} reads dataflow "{source.dataflow.name}", which is not running: '
                    f"{reason}"
                )
            built = upstream.running.built
            options |= {"kind": "dataflow", "path": upstream.running.store.location.uri}
            return SourceInput(source.name, built.data_ddl, options)
        if source.kafka is not None:
            self._require_kafka(where)
            options |= {
                "kind": "kafka",
                "bootstrap_servers": source.kafka.bootstrap_servers,
                "topic": source.kafka.topic,
                "format": source.kafka.format,
            }
            return SourceInput(source.name, source.kafka.schema_, options)
        settings = source.table or source.files or source.changelog
        assert settings is not None
        path = Location.of(settings.path)
        if not path.is_dir():
            raise InvalidSpec(f"{where}: directory {path} does not exist")
        options |= {"path": path.uri}
        if source.table is not None:
            options |= {"kind": "table", "format": "json"}
        elif source.files is not None:
            options |= {"kind": "files", "format": source.files.format.value}
        elif source.changelog is not None:
            options |= {
                "kind": "changelog",
                "format": source.changelog.format.value,
                "time_column": source.changelog.time_column,
                "diff_column": source.changelog.diff_column,
            }
        return SourceInput(source.name, settings.schema_, options)

    def _require_kafka(self, where: str) -> None:
        try:
            jvm: Any = self.spark.sparkContext._jvm
            jvm.java.lang.Class.forName(KAFKA_PROVIDER)
        except Exception:
            raise Unsupported(
                f"{where}: the Kafka connector (org.apache.spark:spark-sql-kafka-0-10) is not "
                "on the classpath; add it with spark.jars.packages or use the container image"
            ) from None

    def _clock_time(self, name: str, time: Timestamp) -> Timestamp | None:
        """The time the dataflow's sources may advance to: ``time``, or its last refresh."""
        spec = self._entries[name].desired.spec
        if spec.refresh is None:
            return time
        return spec.refresh.schedule().round_down(time)


def _remove(layout: DataflowLayout, keep: Iterable[Source] = ()) -> None:
    """Remove a dataflow's state and its sink's contents (it starts over).

    The logs of the sources in ``keep`` that were read with the same settings stay: their
    ingested collections hold what was read, and may have been released upstream since —
    up to their recorded upper (anything after it is read from the upstream again).
    """
    kept = {
        source.name
        for source in keep
        if (logs := layout.source_logs(source.name)).child(SOURCE_FILE).read_text_or_none()
        == source.model_dump_json(by_alias=True)
        and IngestedCollection(logs.child(INGESTED_DIR)).truncate()
    }
    for name in layout.root.list(directories=True) + layout.root.list():
        if name != "sources":
            layout.root.child(name).delete()
    for name in layout.root.child("sources").list(directories=True):
        if name not in kept:
            layout.root.child("sources", name).delete()
    if layout.sink is not None:
        layout.sink.delete()


def dataflows_from(specs: Iterable[tuple[str, DataflowSpec]]) -> DesiredDataflows:
    """A desired set from ``(name, spec)`` pairs (for the local run and tests)."""
    return DesiredDataflows(
        dataflows=[DesiredDataflow(name=name, spec=spec) for name, spec in specs]
    )


def write_status(engine: Engine, path: Path) -> None:
    """The replica's report as JSON, replaced atomically."""
    from dataflow_operator.runtime.engine.clock import atomic_write_text

    atomic_write_text(path, json.dumps(engine.report().to_wire(), indent=2) + "\n")
