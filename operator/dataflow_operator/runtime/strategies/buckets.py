"""Which of a stateful operator's state keys (*buckets*) an update goes to.

Each stateful operator groups its state into :data:`BUCKETS` keys by a hash of what the
update is keyed by (a join key, a group, a row), and Spark runs each key in the state
partition its own hash says: ``pmod(hash(bucket), partitions)``. Numbered 0 to 15, the
buckets fall unevenly into the partitions (into two: 9 and 7, so the larger task lasted
a quarter longer than an even split's, and the stage as long as it). So a bucket is
named by a *label* instead (:data:`LABELS`): sixteen numbers whose hashes modulo 16 are
0 to 15, each once, so that any number of partitions dividing 16 (1, 2, 4, 8, 16)
gets the same number of buckets, whatever the checkpoint was started with.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column
from pyspark.sql import functions as F  # noqa: N812 - Spark's convention

__all__ = ["BUCKETS", "LABELS", "bucket_of"]

BUCKETS = 16
"""State keys per operator (one key per row, group or join key is slow: each is a call)."""

LABELS: tuple[int, ...] = (12, 16, 5, 1, 37, 20, 2, 35, 13, 6, 49, 7, 25, 15, 4, 0)
"""The buckets' labels: ``pmod(hash(LABELS[i]), 16) == i`` with Spark's ``hash`` (Murmur3,
seed 42) of an INT (``tests/runtime/test_buckets.py`` checks it on Spark)."""


def bucket_of(columns: Sequence[Column]) -> Column:
    """The INT label of the bucket of an update keyed by ``columns`` (all in one bucket
    when there are none)."""
    if not columns:
        return F.lit(LABELS[0]).cast("int")
    index = F.pmod(F.hash(*columns), F.lit(BUCKETS))
    return F.element_at(F.expr(_LABELS_SQL), index + 1).cast("int")


_LABELS_SQL = f"array({', '.join(str(label) for label in LABELS)})"
"""The labels as an INT array, in SQL: one call to the JVM where a literal each is many."""
