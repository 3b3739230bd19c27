"""The JVM side of plan node ids: Spark's executed plan walked into the core's values.

A dataflow's plan is Spark's executed physical plan (``queryExecution().executedPlan()``,
or a streaming query's ``lastExecution().executedPlan()``). :func:`capture_plan` walks it
once through py4j (the only JVM access here) into
:class:`~dataflow_operator.core.plan.RawNode` values, which
:func:`~dataflow_operator.core.plan.number_plan` numbers without a JVM. A
:class:`LivePlan` keeps the JVM nodes next to the tree so that SQL metrics can be read
while the plan runs (:meth:`LivePlan.metrics`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dataflow_operator.core.plan import RECURSIVE, TRANSPARENT, PlanTree, RawNode, number_plan

__all__ = ["LivePlan", "capture_plan", "executed_plan", "live_plan"]


def _seq(jseq: Any) -> list[Any]:
    """A Scala ``Seq`` as a Python list."""
    return [jseq.apply(i) for i in range(jseq.size())]


def _jvm_children(jnode: Any, kind: str) -> list[Any]:
    if kind == "AdaptiveSparkPlanExec":
        return [jnode.executedPlan()]
    if kind.endswith("QueryStageExec"):
        return [jnode.plan()]
    children = _seq(jnode.children())
    if kind in RECURSIVE:
        return [*_seq(jnode.innerChildren()), *children]
    return children


def _jvm_metric_names(jnode: Any) -> tuple[str, ...]:
    if not jnode.getClass().getName().startswith("org.apache.spark.sql.execution."):
        return ()
    try:
        keys = jnode.metrics().keys().toSeq()
    except Exception:  # a logical node (inside UnionLoop) has no metrics
        return ()
    return tuple(sorted(str(name) for name in _seq(keys)))


def capture_plan(jplan: Any, *, details: bool = True, metrics: bool = True) -> RawNode:
    """Walk a JVM ``SparkPlan`` into :class:`RawNode` values (handles = the JVM nodes).

    ``details`` reads each node's one-line description, ``metrics`` its metric names;
    leave them off for the cheapest walk (structure and names only).
    """
    kind = str(jplan.getClass().getSimpleName())
    if kind == "ProjectExec" and jplan.output().equals(jplan.child().output()):
        kind = "IdentityProject"
    children = tuple(
        capture_plan(child, details=details, metrics=metrics)
        for child in _jvm_children(jplan, kind)
    )
    return RawNode(
        kind=kind,
        name=str(jplan.nodeName()),
        detail=str(jplan.simpleString(25)) if details and kind not in TRANSPARENT else "",
        children=children,
        metrics=_jvm_metric_names(jplan) if metrics and kind not in TRANSPARENT else (),
        handle=jplan,
    )


@dataclass(frozen=True, slots=True)
class LivePlan:
    """A numbered plan together with the JVM nodes it was taken from."""

    tree: PlanTree
    handles: Mapping[int, Any] = field(repr=False)

    def metrics(self, node_id: int) -> dict[str, int]:
        """The current values of a node's SQL metrics (they grow as tasks finish)."""
        names = self.tree.node(node_id).metrics
        if not names:
            return {}
        jmetrics = self.handles[node_id].metrics()
        return {name: int(jmetrics.apply(name).value()) for name in names}

    def handle(self, node_id: int) -> Any:
        """The JVM node of ``node_id``."""
        return self.handles[node_id]


def live_plan(jplan: Any, *, details: bool = True, metrics: bool = True) -> LivePlan:
    """Capture and number a JVM plan (see :func:`capture_plan`)."""
    tree, raws = number_plan(capture_plan(jplan, details=details, metrics=metrics))
    return LivePlan(tree, {node_id: raw.handle for node_id, raw in raws.items()})


def _scala_module(jvm: Any, name: str) -> Any:
    return jvm.java.lang.Class.forName(name + "$").getField("MODULE$").get(None)


def executed_plan(frame: Any) -> Any:
    """The JVM executed plan a DataFrame runs with (py4j object).

    A batch frame's is its query execution's. A streaming frame's is the plan of a
    micro-batch: planned as Spark's own ``explain`` does it (an ``IncrementalExecution``
    of batch 0, append mode, no checkpoint), so its operators and ids are those of the
    running query's ``lastExecution`` (its leaves named ``StreamingRelation`` rather
    than the scans they become).
    """
    if not frame.isStreaming:
        return frame._jdf.queryExecution().executedPlan()
    session = frame.sparkSession
    jvm = session._jvm
    runtime = "org.apache.spark.sql.execution.streaming.runtime."
    incremental = _scala_module(jvm, runtime + "IncrementalExecution")
    metadata = _scala_module(
        jvm, "org.apache.spark.sql.execution.streaming.checkpointing.OffsetSeqMetadata"
    )
    defaults = [getattr(incremental, f"$lessinit$greater$default${n}")() for n in range(12, 17)]
    execution = getattr(jvm, runtime + "IncrementalExecution")(
        session._jsparkSession,
        frame._jdf.queryExecution().analyzed(),
        jvm.org.apache.spark.sql.streaming.OutputMode.Append(),
        "<unknown>",
        jvm.java.util.UUID.randomUUID(),
        jvm.java.util.UUID.randomUUID(),
        0,
        jvm.scala.Option.empty(),
        metadata.apply(0, 0, getattr(metadata, "apply$default$3")()),
        _scala_module(jvm, runtime + "WatermarkPropagator").noop(),
        False,
        *defaults,
    )
    return execution.executedPlan()
