"""Physical plan node ids: a plan as plain Python values, numbered as explain numbers it.

The runtime walks Spark's executed physical plan once through py4j
(:mod:`dataflow_operator.runtime.hydration.plan`) into :class:`RawNode` values; :func:`number_plan`
turns those into a :class:`PlanTree` without a JVM:

- ids are increasing integers from 1, children before parents (post-order), unique
  within the plan and stable for a given plan: the same plan always gets the same ids;
- like Spark's ``explain("formatted")``, the wrappers that only drive execution are not
  nodes: whole-stage codegen and its input adapters, and adaptive execution's
  ``AdaptiveSparkPlan``, query stages and shuffle reads (their operators are walked
  through). The ids therefore do not move when adaptive execution materializes stages.
  Nor are projections that output exactly their input (a micro-batch adds one above a
  scan that read data), so a streaming query's ids are the same in every batch and in
  the explain-time plan;
- the recursive part of a ``WITH RECURSIVE`` (``UnionLoop`` and the anchor and recursion
  plans Spark keeps beside it) is walked too and flagged :attr:`PlanNode.recursive`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "BROADCAST_EXCHANGES",
    "EXCHANGES",
    "RECURSIVE",
    "SHUFFLE_EXCHANGES",
    "TRANSPARENT",
    "PlanNode",
    "PlanTree",
    "RawNode",
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
