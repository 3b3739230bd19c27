"""Which joins of a query plan get a fuse, and where.

Spark cancels a task by marking it killed and interrupting its thread, but the inner loops
of its nested-loop and cartesian joins, and the loop over a hash join's matches, never look
(SPARK-33409): a task whose join multiplies its input keeps a core busy long after its job
was cancelled. A *fuse* is a pass-through stage that fails the task once it is interrupted,
checked every so many rows; standing after a join, it ends the loop that feeds it.

The runtime describes each join of a plan (its type as Spark names it, whether its
condition has equality keys) and applies what :func:`join_fuses` decides. Pure: no Spark.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["NOT_MULTIPLYING", "JoinFuses", "join_fuses"]

NOT_MULTIPLYING = frozenset({"leftsemi", "leftanti", "existencejoin"})
"""Join types (Spark's ``JoinType`` names, lower case) whose output has at most one row
per left row: they filter, they do not multiply."""


@dataclass(frozen=True, slots=True)
class JoinFuses:
    """Where one join gets fuses."""

    output: bool
    """After the join: its output can hold up to one row per pair of input rows."""
    inputs: bool
    """After each of its inputs: a nested-loop join pairs every row of one input with every
    row of the other, so its work can explode while its output stays small (a selective
    condition, a semi join); a fuse on the input it streams is checked as it advances."""


def join_fuses(join_type: str, has_equality_keys: bool) -> JoinFuses:
    """Where a join of type ``join_type`` gets fuses: Spark's ``JoinType`` as it prints
    (``Inner``, ``Cross``, ``LeftOuter``, ``LeftSemi``, ``ExistenceJoin(exists#7)``…).

    Every join that can multiply rows gets one after it, equality joins included (a key
    shared by many rows on both sides multiplies as much as a cross join); a join without
    equality keys, which Spark runs as a nested loop, gets one after each input too.
    """
    kind = join_type.split("(", maxsplit=1)[0].strip().lower()
    if not kind:
        raise ValueError(f"join_type: {join_type!r} names no join type; expected e.g. Inner")
    multiplying = kind not in NOT_MULTIPLYING
    return JoinFuses(output=multiplying, inputs=not has_equality_keys)
