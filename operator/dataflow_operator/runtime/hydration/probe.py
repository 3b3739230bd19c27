"""Spark's progress on a streaming query's snapshot batch: the JVM side of hydration.

:class:`StreamingQueryProbe` reads, for one query, its snapshot batch's executed plan,
the jobs of the query's job groups and their stages, and shuffle and broadcast
completion: a few py4j calls per poll, turned into the core's
:class:`~dataflow_operator.core.hydration.Progress`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from dataflow_operator.core.hydration import ROOT_GROUP, Progress, stage_groups
from dataflow_operator.core.plan import BROADCAST_EXCHANGES, SHUFFLE_EXCHANGES
from dataflow_operator.runtime.hydration.plan import LivePlan, live_plan

__all__ = ["ProgressProbe", "StreamingQueryProbe"]


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
