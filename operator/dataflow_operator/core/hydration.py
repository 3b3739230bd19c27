"""Hydration: has an object (or a plan node) finished processing its snapshot?"""

from __future__ import annotations

from dataflow_operator.core.time import Frontier

__all__ = ["is_hydrated"]


def is_hydrated(output_frontier: Frontier, as_of: Frontier) -> bool:
    """Hydrated once the output frontier is strictly beyond ``as_of``.

    An empty ``as_of`` (nothing to read) counts as hydrated; an empty output frontier
    (complete forever) is beyond any ``as_of``.
    """
    if as_of.lower is None:
        return True
    return not output_frontier.less_equal(as_of.lower)
