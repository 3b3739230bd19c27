"""Hydration: has an object (or a plan node) finished processing its snapshot?

The dataflow follows :func:`is_hydrated`. Its plan nodes hydrate earlier, stage by
stage, as Spark finishes the snapshot batch:

- a node's output is complete when the Spark stage computing it has completed. Stage
  boundaries are the exchanges, so the nodes are grouped by the nearest exchange at or
  above them (:func:`stage_groups`): a shuffle exchange's group is done when the map
  stage writing its shuffle has completed, a broadcast exchange's when its broadcast is
  built, the root's group (the last stage) when the batch has completed;
- a node whose consumer is hydrated is hydrated too (its output was consumed whole);
- nodes inside a recursive part (under ``UnionLoop``) only once the recursion for
  ``as_of`` has finished (:func:`loops_done`);
- every node once the dataflow is hydrated.

What Spark has done is a :class:`Progress`, read by the runtime's probe.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from dataflow_operator.core.plan import RECURSIVE, PlanTree
from dataflow_operator.core.time import Frontier

__all__ = [
    "ROOT_GROUP",
    "Progress",
    "hydrated_nodes",
    "is_hydrated",
    "loops_done",
    "stage_groups",
]

ROOT_GROUP = 0
"""The group of the nodes above every exchange: done when the plan's output is."""


def is_hydrated(output_frontier: Frontier, as_of: Frontier) -> bool:
    """Hydrated once the output frontier is strictly beyond ``as_of``.

    An empty ``as_of`` (nothing to read) counts as hydrated; an empty output frontier
    (complete forever) is beyond any ``as_of``.
    """
    if as_of.lower is None:
        return True
    return not output_frontier.less_equal(as_of.lower)


def stage_groups(tree: PlanTree) -> dict[int, int]:
    """Each node's stage group: the id of the nearest exchange at or above it, or 0.

    An exchange is in its own group (its output is complete when the stage writing it
    is); the nodes above every exchange are in :data:`ROOT_GROUP`.
    """
    groups: dict[int, int] = {}
    for node in tree.preorder():  # parents first: children inherit, exchanges start anew
        if node.is_exchange:
            groups[node.node_id] = node.node_id
        elif node.node_id == tree.root.node_id:
            groups[node.node_id] = ROOT_GROUP
        for child in node.children:
            groups[child] = groups[node.node_id]
    return groups


def hydrated_nodes(
    tree: PlanTree,
    done_groups: Iterable[int],
    *,
    recursion_done: bool,
    everything: bool = False,
) -> set[int]:
    """The ids of the nodes whose output for the snapshot is complete.

    ``done_groups`` are the stage groups (see :func:`stage_groups`) whose stage has
    completed; ``recursion_done`` says the recursive parts finished for ``as_of``;
    ``everything`` (the dataflow is hydrated) makes every node hydrated.
    """
    if everything:
        return {node.node_id for node in tree}
    done = set(done_groups)
    groups = stage_groups(tree)
    hydrated: set[int] = set()
    for node in tree.preorder():  # parents first: a hydrated consumer hydrates its inputs
        if node.node_id in hydrated or groups[node.node_id] in done:
            hydrated.add(node.node_id)
            hydrated.update(_descendants(tree, node.node_id))
    if not recursion_done:
        hydrated = {n for n in hydrated if not tree.node(n).recursive}
    return hydrated


def loops_done(tree: PlanTree, done_groups: Iterable[int]) -> bool:
    """Whether every recursion finished: Spark runs a ``UnionLoop``'s iterations before
    the stage that reads its output, so the loop is done once that stage is."""
    groups = stage_groups(tree)
    done = set(done_groups)
    return all(groups[node.node_id] in done for node in tree if node.kind in RECURSIVE)


def _descendants(tree: PlanTree, node_id: int) -> Iterable[int]:
    stack = list(tree.node(node_id).children)
    while stack:
        child = stack.pop()
        yield child
        stack.extend(tree.node(child).children)


@dataclass(frozen=True, slots=True)
class Progress:
    """What Spark has done of a dataflow's snapshot batch, as a probe saw it."""

    tree: PlanTree | None = None
    """The snapshot batch's plan (``None`` until Spark planned it)."""
    done_groups: frozenset[int] = frozenset()
    """Stage groups whose stage has completed."""
    batch_done: bool = False
    """The snapshot batch has finished (every stage of it has)."""
    recursion_done: bool | None = None
    """Whether the recursive parts finished; ``None``: as their stage group says."""
