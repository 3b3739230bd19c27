"""A row's multiplicity in the output of DISTINCT or a set operation, from its
multiplicities in the inputs (SQL's bag semantics).

A module of its own, without sqlglot: the set operations' stateful processor
(:mod:`dataflow_operator.runtime.strategies.row_counts`) runs it in Spark's Python
workers, and Spark's pre-init runner imports it at every query start.
"""

from __future__ import annotations

from typing import Literal

__all__ = ["SetOperation", "output_multiplicity"]

SetOperation = Literal["distinct", "union", "except", "except_all", "intersect", "intersect_all"]


def output_multiplicity(operation: SetOperation, a: int, b: int = 0) -> int:
    """How many times a row is in the output when it is ``a`` times in the first input
    and ``b`` times in the second (SQL's bag semantics; DISTINCT forms give 0 or 1)."""
    if operation == "distinct":
        return int(a > 0)
    if operation == "union":
        return int(a + b > 0)
    if operation == "except":
        return int(a > 0 and b <= 0)
    if operation == "except_all":
        return max(a - max(b, 0), 0)
    if operation == "intersect":
        return int(a > 0 and b > 0)
    return max(min(a, b), 0)  # intersect_all
