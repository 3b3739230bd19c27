"""The buckets' labels (:mod:`.buckets`) against Spark's own hash partitioning."""

from __future__ import annotations

from collections import Counter

from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812 - Spark's convention

from dataflow_operator.runtime.strategies.buckets import BUCKETS, LABELS, bucket_of


def test_every_partition_count_dividing_the_buckets_gets_as_many_buckets(
    spark: SparkSession,
) -> None:
    labels = spark.createDataFrame([(label,) for label in LABELS], "label INT")
    residues = [
        row.residue
        for row in labels.select(F.pmod(F.hash("label"), F.lit(BUCKETS)).alias("residue")).collect()
    ]

    assert residues == list(range(BUCKETS))  # so for 1, 2, 4, 8 and 16 partitions, even
    for partitions in (2, 4, 8):
        assert set(Counter(r % partitions for r in residues).values()) == {BUCKETS // partitions}


def test_keys_go_to_labelled_buckets_by_their_hash(spark: SparkSession) -> None:
    keys = spark.range(2000).select(F.col("id").alias("k"))

    buckets = keys.select(bucket_of([F.col("k")]).alias("b"), F.col("k")).collect()
    unkeyed = keys.limit(3).select(bucket_of([]).alias("b")).collect()

    counts = Counter(row.b for row in buckets)
    assert set(counts) == set(LABELS)  # every label used, no other value
    assert min(counts.values()) > 2000 / BUCKETS / 2  # spread by the key's hash
    assert {row.b for row in unkeyed} == {LABELS[0]}
