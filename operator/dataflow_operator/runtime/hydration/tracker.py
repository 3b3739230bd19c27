"""Hydration tracking: which plan nodes of a dataflow have processed its snapshot.

The rules are the core's (:mod:`dataflow_operator.core.hydration`): the dataflow is
hydrated once its write frontier is strictly beyond ``as_of`` (``hydrationTime`` is how
long that took from installation); its plan nodes hydrate earlier, stage by stage, as
Spark finishes the snapshot batch. Here they are applied to a running query:

:class:`HydrationTracker` holds one dataflow's state and is pure (no JVM).
:class:`StreamingQueryProbe` reads Spark's progress for one streaming query (its
snapshot batch's executed plan, the jobs of the query's job group and their stages,
shuffle and broadcast completion) — the only JVM access here, a few py4j calls per poll.
:class:`HydrationMonitor` polls the probes of the dataflows still hydrating from one
background thread, and stops polling a dataflow once it is hydrated, so the cost is
bounded by the snapshot and nil afterwards.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from dataflow_operator.api.dataflow import NodeStatus
from dataflow_operator.core.hydration import (
    ROOT_GROUP,
    Progress,
    hydrated_nodes,
    is_hydrated,
    loops_done,
    stage_groups,
)
from dataflow_operator.core.plan import BROADCAST_EXCHANGES, SHUFFLE_EXCHANGES, PlanTree
from dataflow_operator.core.time import Frontier
from dataflow_operator.logs import get_logger
from dataflow_operator.runtime.hydration.plan import LivePlan, live_plan

__all__ = [
    "DataflowHydration",
    "HydrationMonitor",
    "HydrationStatus",
    "HydrationTracker",
    "ProgressProbe",
    "StreamingQueryProbe",
    "shared_monitor",
]

log = get_logger(__name__)


@dataclass(frozen=True, slots=True)
class HydrationStatus:
    """A dataflow's hydration, as reported in ``/status``."""

    hydrated: bool
    hydration_time_ms: int | None
    nodes: tuple[NodeStatus, ...]

    def progress_line(self) -> str:
        """One line for humans: ``hydrated in 2.5 s`` or ``hydrating: 3/11 nodes``."""
        if self.hydrated:
            took = self.hydration_time_ms or 0
            return f"hydrated in {took / 1000:.1f} s ({len(self.nodes)} nodes)"
        done = sum(node.hydrated for node in self.nodes)
        return f"hydrating: {done}/{len(self.nodes)} nodes"


def _monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class HydrationTracker:
    """One dataflow's hydration on this replica (thread-safe, no JVM).

    ``as_of`` is the snapshot time; an empty ``as_of`` (all inputs constant) is hydrated
    from the start. The engine reports the write frontier with :meth:`observe_frontier`;
    a probe (through :class:`HydrationMonitor`) reports Spark's progress with
    :meth:`observe_progress`. Once hydrated, nothing changes any more.
    """

    def __init__(
        self, name: str, as_of: Frontier, *, clock: Callable[[], int] = _monotonic_ms
    ) -> None:
        self.name = name
        self.as_of = as_of
        self._clock = clock
        self._lock = threading.Lock()
        self._installed_at = clock()
        self._frontier = Frontier.minimum() if as_of.lower is not None else Frontier.empty()
        self._tree: PlanTree | None = None
        self._hydrated_nodes: set[int] = set()
        self._hydration_time_ms: int | None = None
        self._update_dataflow()

    @property
    def hydrated(self) -> bool:
        """Whether the dataflow is hydrated."""
        return self._hydration_time_ms is not None

    def observe_frontier(self, frontier: Frontier) -> None:
        """The dataflow's write frontier advanced to ``frontier``."""
        with self._lock:
            self._frontier = frontier if self._frontier <= frontier else self._frontier
            self._update_dataflow()

    def observe_progress(self, progress: Progress) -> None:
        """Spark's progress on the snapshot batch (node hydration only ever grows)."""
        with self._lock:
            if progress.tree is None:
                return
            if self._tree is None or self._tree != progress.tree:
                self._tree = progress.tree
                self._hydrated_nodes &= {n.node_id for n in progress.tree}
            if self.hydrated:
                return
            recursion_done = (
                progress.recursion_done
                if progress.recursion_done is not None
                else progress.batch_done or loops_done(progress.tree, progress.done_groups)
            )
            now = hydrated_nodes(
                progress.tree,
                progress.done_groups,
                recursion_done=recursion_done,
                everything=progress.batch_done,
            )
            new = now - self._hydrated_nodes
            self._hydrated_nodes |= now
            if new:
                tree = progress.tree
                log.info(
                    "plan nodes hydrated",
                    dataflow=self.name,
                    nodes=f"{len(self._hydrated_nodes)}/{len(tree)}",
                    hydrated=[f"{tree.node(n).operator} ({n})" for n in sorted(new)],
                )

    def _update_dataflow(self) -> None:
        if self._hydration_time_ms is None and is_hydrated(self._frontier, self.as_of):
            self._hydration_time_ms = max(0, self._clock() - self._installed_at)
            log.info("dataflow hydrated", dataflow=self.name, ms=self._hydration_time_ms)

    def status(self) -> HydrationStatus:
        """The current hydration of the dataflow and of each plan node."""
        with self._lock:
            tree = self._tree
            hydrated = self._hydration_time_ms is not None
            nodes = (
                ()
                if tree is None
                else tuple(
                    NodeStatus(
                        id=node.node_id,
                        operator=node.operator,
                        hydrated=hydrated or node.node_id in self._hydrated_nodes,
                    )
                    for node in tree
                )
            )
            return HydrationStatus(hydrated, self._hydration_time_ms, nodes)


# --- reading Spark's progress (JVM) ---------------------------------------------------


class ProgressProbe(Protocol):
    """Reads what Spark has done of one dataflow's snapshot batch."""

    def poll(self) -> Progress:
        """Spark's progress now (a few cheap calls)."""
        ...


@dataclass
class _Batch:
    batch_id: int
    execution: Any
    plan: LivePlan
    groups: dict[int, int]
    targets: dict[int, int] = field(default_factory=dict)
    """Shuffle exchange's group → the RDD its map stage computes last."""
    stages: dict[int, int] = field(default_factory=dict)
    """Stage group → the id of that stage, once found."""
    done: set[int] = field(default_factory=set)


class StreamingQueryProbe:
    """Spark's progress on the first batch a streaming query runs after it is probed.

    That batch is the snapshot batch when the probe is created right after the query
    starts. ``job_groups`` are the job groups whose jobs compute the query's batches;
    Spark's stream execution uses the query's run id, which is always included.

    Cost: nothing is read before the batch's first job (so the probe never waits on
    Spark's planning); then one walk of the plan (a few hundred py4j calls, once), and per
    poll a handful of calls per stage group not yet complete.
    """

    def __init__(self, query: Any, job_groups: Iterable[str] = ()) -> None:
        from pyspark import SparkContext

        jvm: Any = SparkContext._jvm
        self._arrays = jvm.java.util.Arrays
        self._jquery = query._jsq.streamingQuery()
        jsc = query._jsq.sparkSession().sparkContext()
        self._tracker = jsc.statusTracker()
        self._store = jsc.statusStore()
        self._groups = [str(query.runId), *job_groups]
        self._batch: _Batch | None = None
        self._job_stages: dict[int, tuple[int, ...]] = {}
        self._stage_rdds: dict[int, frozenset[int]] = {}
        self._fields: dict[str, Any] = {}

    def poll(self) -> Progress:
        """See :class:`ProgressProbe`."""
        batch = self._batch
        if batch is None:
            batch = self._start()
            if batch is None:
                return Progress()
        elif self._finished(batch):
            return Progress(batch.plan.tree, frozenset(batch.groups.values()), batch_done=True)
        for group in set(batch.groups.values()) - batch.done:
            if self._group_done(batch, group):
                batch.done.add(group)
        return Progress(batch.plan.tree, frozenset(batch.done))

    def _start(self) -> _Batch | None:
        execution = self._jquery.lastExecution()
        if execution is None or not self._job_ids():
            return None  # not planned, or its RDDs not built yet: come back later
        plan = live_plan(execution.executedPlan(), details=False, metrics=False)
        batch = _Batch(int(execution.currentBatchId()), execution, plan, stage_groups(plan.tree))
        self._batch = batch
        return batch

    def _finished(self, batch: _Batch) -> bool:
        progress = self._jquery.lastProgress()
        return progress is not None and int(progress.batchId()) >= batch.batch_id

    def _ints(self, values: Any) -> list[int]:
        """A JVM int array or Scala Seq of ints, in one call."""
        from py4j.java_collections import JavaArray

        if isinstance(values, JavaArray):
            text = str(self._arrays.toString(values)).strip("[]")
        else:
            text = str(values.mkString(","))
        return [int(part) for part in text.split(",") if part.strip()]

    def _job_ids(self) -> list[int]:
        found: list[int] = []
        for group in self._groups:
            found.extend(self._ints(self._tracker.getJobIdsForGroup(group)))
        return sorted(found)

    def _target(self, batch: _Batch, group: int) -> int | None:
        """The RDD a shuffle exchange's map stage computes last, once Spark has built it.

        Read from the exchange's ``shuffleDependency`` field, never through its lazy
        accessor: calling that first would build the exchange's input (and run its
        broadcasts) in this thread instead of the query's.
        """
        if group in batch.targets:
            return batch.targets[group]
        handle = batch.plan.handle(group)
        field = self._fields.get(str(handle.getClass().getName()))
        if field is None:
            field = handle.getClass().getDeclaredField("shuffleDependency")
            field.setAccessible(True)
            self._fields[str(handle.getClass().getName())] = field
        dependency = field.get(handle)
        if dependency is None:
            return None
        batch.targets[group] = int(dependency.rdd().id())
        return batch.targets[group]

    def _group_done(self, batch: _Batch, group: int) -> bool:
        if group == ROOT_GROUP:
            return False  # the plan's output is complete when the batch is
        kind = batch.plan.tree.node(group).kind
        if kind in BROADCAST_EXCHANGES:
            return bool(batch.plan.handle(group).completionFuture().isCompleted())
        if kind not in SHUFFLE_EXCHANGES or self._target(batch, group) is None:
            return False
        if group not in batch.stages:
            self._find_stages(batch)
        stage = batch.stages.get(group)
        if stage is None:
            return False
        return str(self._store.lastStageAttempt(stage).status().toString()) == "COMPLETE"

    def _find_stages(self, batch: _Batch) -> None:
        """Map the pending groups to stages: the stage whose RDDs include the target."""
        for job in self._job_ids():
            if job not in self._job_stages:
                try:
                    self._job_stages[job] = tuple(self._ints(self._store.job(job).stageIds()))
                except Exception:  # not in the status store yet
                    continue
            for stage in self._job_stages[job]:
                if stage not in self._stage_rdds:
                    try:
                        rdds = self._store.lastStageAttempt(stage).rddIds()
                    except Exception:  # not in the status store yet
                        continue
                    self._stage_rdds[stage] = frozenset(self._ints(rdds))
                for group, rdd in batch.targets.items():
                    if group not in batch.stages and rdd in self._stage_rdds[stage]:
                        batch.stages[group] = stage


# --- polling -------------------------------------------------------------------------


class HydrationMonitor:
    """Polls the progress probes of hydrating dataflows from one background thread.

    ``interval`` is the time between polls (seconds). A dataflow is polled only until it
    is hydrated.
    """

    def __init__(self, interval: float = 0.5) -> None:
        self.interval = interval
        self._lock = threading.Lock()
        self._watched: dict[str, tuple[HydrationTracker, ProgressProbe]] = {}
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def watch(self, tracker: HydrationTracker, probe: ProgressProbe | None) -> None:
        """Follow ``tracker``'s dataflow through ``probe`` until it is hydrated."""
        if probe is None or tracker.hydrated:
            return
        with self._lock:
            self._watched[tracker.name] = (tracker, probe)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="hydration-monitor", daemon=True
                )
                self._thread.start()
        self._wake.set()

    def forget(self, name: str) -> None:
        """Stop following dataflow ``name`` (dropped or reinstalled)."""
        with self._lock:
            self._watched.pop(name, None)

    def watched(self) -> Mapping[str, HydrationTracker]:
        """The dataflows still followed."""
        with self._lock:
            return {name: tracker for name, (tracker, _) in self._watched.items()}

    def poll_once(self) -> None:
        """Poll every followed dataflow once (the thread does this every ``interval``)."""
        with self._lock:
            watched = list(self._watched.items())
        for name, (tracker, probe) in watched:
            if tracker.hydrated:
                self.forget(name)
                continue
            try:
                tracker.observe_progress(probe.poll())
            except Exception as error:  # a query stopping under us; retried next time
                log.debug("hydration probe failed", dataflow=name, error=str(error))

    def _run(self) -> None:
        while not self._stopping.is_set():
            self.poll_once()
            with self._lock:
                idle = not self._watched
            if idle:
                self._wake.wait()
                self._wake.clear()
            else:
                self._stopping.wait(self.interval)

    def stop(self) -> None:
        """Stop the polling thread."""
        self._stopping.set()
        self._wake.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout=5)


_shared: list[HydrationMonitor] = []
_shared_lock = threading.Lock()


def shared_monitor() -> HydrationMonitor:
    """The process's hydration monitor (one polling thread for every dataflow)."""
    with _shared_lock:
        if not _shared:
            _shared.append(HydrationMonitor())
        return _shared[0]


class DataflowHydration:
    """The hooks a running dataflow calls to have its plan nodes' hydration tracked.

    :meth:`begin` when its query starts processing the snapshot (``as_of``),
    :meth:`observe_frontier` after each batch, :meth:`nodes` for its report,
    :meth:`stop` when it is dropped.
    """

    def __init__(self, name: str, monitor: HydrationMonitor | None = None) -> None:
        self.name = name
        self._monitor = monitor
        self.tracker: HydrationTracker | None = None

    def begin(self, query: Any, as_of: Frontier, job_groups: Iterable[str] = ()) -> None:
        """Start following ``query``'s next batch, the snapshot at ``as_of``.

        Nothing changes once the dataflow was found hydrated already (see :meth:`nodes`).
        """
        if self.tracker is not None and self.tracker.hydrated:
            return
        monitor = self._monitor or shared_monitor()
        self.tracker = HydrationTracker(self.name, as_of)
        probe = None
        if query is not None:
            try:
                probe = StreamingQueryProbe(query, job_groups)
            except Exception as error:  # no JVM query behind it: dataflow-level only
                log.debug("no hydration probe", dataflow=self.name, error=str(error))
        monitor.watch(self.tracker, probe)

    def observe_frontier(self, frontier: Frontier) -> None:
        """The dataflow's write frontier advanced."""
        if self.tracker is not None:
            self.tracker.observe_frontier(frontier)

    def status(self) -> HydrationStatus | None:
        """The tracked hydration, once :meth:`begin` was called."""
        return None if self.tracker is None else self.tracker.status()

    def nodes(self, hydrated: bool = False, query: Any = None) -> list[NodeStatus]:
        """The plan nodes' hydration (all hydrated when the dataflow is).

        A dataflow found hydrated before its snapshot batch's plan was read (its first
        batch ran before :meth:`begin`) lists the nodes of its query's last execution,
        all hydrated, when its ``query`` is given.
        """
        status = self.status()
        if hydrated and query is not None and (status is None or not status.nodes):
            self._late(query)
            status = self.status()
        if status is None:
            return []
        if hydrated and not status.hydrated:
            return [node.model_copy(update={"hydrated": True}) for node in status.nodes]
        return list(status.nodes)

    def _late(self, query: Any) -> None:
        try:
            progress = StreamingQueryProbe(query).poll()
        except Exception as error:  # the query is gone; no nodes to list
            log.debug("no plan for hydration", dataflow=self.name, error=str(error))
            return
        if progress.tree is not None:
            tracker = HydrationTracker(self.name, Frontier.empty())
            tracker.observe_progress(progress)
            (self._monitor or shared_monitor()).forget(self.name)
            self.tracker = tracker

    def stop(self) -> None:
        """Stop following the dataflow."""
        (self._monitor or shared_monitor()).forget(self.name)
