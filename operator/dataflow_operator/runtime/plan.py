"""Physical plan node ids: the Spark plan that actually runs, as plain Python values.

A dataflow's plan is Spark's executed physical plan (``queryExecution().executedPlan()``,
or a streaming query's ``lastExecution().executedPlan()``). :func:`capture_plan` walks it
once through py4j (the only JVM access in this module) into :class:`RawNode` values;
:func:`number_plan` turns those into a :class:`PlanTree` without a JVM:

- ids are increasing integers from 1, children before parents (post-order), unique
  within the plan and stable for a given plan: the same plan always gets the same ids;
- like Spark's ``explain("formatted")``, the wrappers that only drive execution are not
  nodes: whole-stage codegen and its input adapters, and adaptive execution's
  ``AdaptiveSparkPlan``, query stages and shuffle reads (their operators are walked
  through). The ids therefore do not move when adaptive execution materializes stages.
  Nor are projections that output exactly their input (a micro-batch adds one above a
  scan that read data), so a streaming query's ids are the same in every batch and in
  :func:`executed_plan`'s explain-time plan;
- the recursive part of a ``WITH RECURSIVE`` (``UnionLoop`` and the anchor and recursion
  plans Spark keeps beside it) is walked too and flagged :attr:`PlanNode.recursive`.

A :class:`LivePlan` keeps the JVM nodes next to the tree so that SQL metrics can be read
while the plan runs (:meth:`LivePlan.metrics`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "LivePlan",
    "PlanNode",
    "PlanTree",
    "RawNode",
    "capture_plan",
    "executed_plan",
    "live_plan",
    "number_plan",
]

TRANSPARENT = frozenset(
    {
        "WholeStageCodegenExec",
        "InputAdapter",
        "AdaptiveSparkPlanExec",
        "ShuffleQueryStageExec",
        "BroadcastQueryStageExec",
        "ResultQueryStageExec",
        "TableCacheQueryStageExec",
        "AQEShuffleReadExec",
        "IdentityProject",
    }
)
"""JVM classes that drive execution but are not operators of their own.

``IdentityProject`` stands for a ``ProjectExec`` whose output is its input's: a streaming
micro-batch puts one above a scan that has data (the explain-time plan and an empty
batch have none), so the ids do not depend on whether a batch read anything.
"""

RECURSIVE = frozenset({"UnionLoopExec", "UnionLoop"})
"""The root of a recursive part of a plan (``WITH RECURSIVE``)."""

SHUFFLE_EXCHANGES = frozenset({"ShuffleExchangeExec"})
BROADCAST_EXCHANGES = frozenset({"BroadcastExchangeExec"})
EXCHANGES = SHUFFLE_EXCHANGES | BROADCAST_EXCHANGES
"""Operators at a stage boundary: their output is complete when their stage is."""

MAX_DETAIL = 200


@dataclass(frozen=True, slots=True)
class RawNode:
    """One node of a plan as walked, before numbering (wrappers still included).

    ``handle`` is whatever identifies the node where it lives (a py4j object for a real
    plan, anything in tests); it takes no part in equality.
    """

    kind: str
    """The JVM class's simple name, e.g. ``HashAggregateExec``."""
    name: str
    """Spark's node name, e.g. ``HashAggregate``."""
    detail: str = ""
    """One line describing the node (Spark's ``simpleString``)."""
    children: tuple[RawNode, ...] = ()
    metrics: tuple[str, ...] = ()
    """Names of the node's SQL metrics."""
    handle: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class PlanNode:
    """One physical operator of a dataflow's plan, with its id."""

    node_id: int
    operator: str
    """Spark's node name, e.g. ``HashAggregate``."""
    kind: str
    """The JVM class's simple name."""
    detail: str
    """One line: what explain prints for the node."""
    depth: int
    """Distance from the root (the root is 0)."""
    children: tuple[int, ...]
    """Ids of the node's inputs, in plan order."""
    metrics: tuple[str, ...]
    """Names of the node's SQL metrics."""
    recursive: bool
    """Inside a recursive part (``UnionLoop`` or below it)."""

    @property
    def is_exchange(self) -> bool:
        """True for a shuffle or broadcast exchange: a stage boundary."""
        return self.kind in EXCHANGES


@dataclass(frozen=True, slots=True)
class PlanTree:
    """A numbered plan: nodes by id (1…n, children first), the root last."""

    nodes: tuple[PlanNode, ...]

    def __iter__(self) -> Iterator[PlanNode]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self.nodes)

    def node(self, node_id: int) -> PlanNode:
        """The node with ``node_id``."""
        return self.nodes[node_id - 1]

    @property
    def root(self) -> PlanNode:
        """The plan's root (the node with the highest id)."""
        return self.nodes[-1]

    def parents(self) -> dict[int, int]:
        """Each node's parent id (the root has none)."""
        return {child: node.node_id for node in self.nodes for child in node.children}

    def preorder(self) -> Iterator[PlanNode]:
        """Nodes root first, each followed by its subtrees in plan order (explain order)."""
        stack = [self.root.node_id] if self.nodes else []
        while stack:
            node = self.node(stack.pop())
            yield node
            stack.extend(reversed(node.children))

    def render(self, *, node_ids: bool = False, indent: str = "  ") -> list[str]:
        """One line per node, indented by depth; ``// { node_id: N }`` when asked."""
        return [
            f"{indent * node.depth}{node.detail or node.operator}"
            + (f" // {{ node_id: {node.node_id} }}" if node_ids else "")
            for node in self.preorder()
        ]


def _dissolve(raw: RawNode) -> list[RawNode]:
    """The operators standing for ``raw``: itself, or its children's if it is a wrapper."""
    if raw.kind in TRANSPARENT:
        return [op for child in raw.children for op in _dissolve(child)]
    return [raw]


def number_plan(root: RawNode) -> tuple[PlanTree, dict[int, RawNode]]:
    """Number the operators of ``root`` children-first from 1; also each id's raw node.

    Wrappers (:data:`TRANSPARENT`) are dissolved; nodes under a ``UnionLoop`` are
    flagged recursive. Raises ``ValueError`` when the plan has no operator at all.
    """
    nodes: list[PlanNode] = []
    raws: dict[int, RawNode] = {}

    def visit(raw: RawNode, depth: int, recursive: bool) -> int:
        inner = recursive or raw.kind in RECURSIVE
        child_ids = tuple(
            visit(child, depth + 1, inner) for direct in raw.children for child in _dissolve(direct)
        )
        node_id = len(nodes) + 1
        nodes.append(
            PlanNode(
                node_id=node_id,
                operator=raw.name,
                kind=raw.kind,
                detail=_one_line(raw.detail) or raw.name,
                depth=depth,
                children=child_ids,
                metrics=raw.metrics,
                recursive=inner,
            )
        )
        raws[node_id] = raw
        return node_id

    tops = _dissolve(root)
    if len(tops) != 1:
        raise ValueError(f"a plan has one root operator, found {len(tops)}")
    visit(tops[0], 0, False)
    return PlanTree(tuple(nodes)), raws


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= MAX_DETAIL else line[: MAX_DETAIL - 1] + "…"


# --- the JVM side: kept to these few functions --------------------------------------


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
