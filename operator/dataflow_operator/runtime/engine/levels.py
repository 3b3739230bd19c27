"""The order of dataflows: upstream first when installing, in levels when stepping."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

from dataflow_operator.api.catalog import Catalog
from dataflow_operator.core.errors import DomainError
from dataflow_operator.runtime.engine.running import RunningDataflow

__all__ = ["dependency_order", "step_levels", "upstream_of"]

T = TypeVar("T")


def step_levels(
    work: list[tuple[RunningDataflow, T]],
) -> list[list[tuple[RunningDataflow, T]]]:
    """``work`` (in dependency order) in levels: each dataflow one past the latest level
    of the dataflows it reads, so that a level's dataflows can run side by side."""
    level_of: dict[str, int] = {}
    levels: list[list[tuple[RunningDataflow, T]]] = []
    for item in work:
        running = item[0]
        reads = running.settings.reads
        level = 1 + max((level_of[name] for name in reads if name in level_of), default=-1)
        level_of[running.name] = level
        if level == len(levels):
            levels.append([])
        levels[level].append(item)
    return levels


def upstream_of(catalog: Catalog, name: str) -> list[str]:
    """The dataflows ``name`` reads, directly or not (none when its sources do not resolve)."""
    try:
        return catalog.upstream(name)
    except DomainError:
        return []


def dependency_order(catalog: Catalog, names: Iterable[str]) -> list[str]:
    """``names`` and what they read, every dataflow after the ones it reads."""
    order: list[str] = []
    for name in sorted(names):
        order.extend(n for n in [*upstream_of(catalog, name), name] if n not in order)
    return order
