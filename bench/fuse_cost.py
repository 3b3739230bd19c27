"""What fuses cost when nothing is dropped: the same join queries plain and fused.

The inputs are built as a GENERAL dataflow's recompute builds them (JSON rows
parallelized into one partition, cached here so that reading them is not measured), and
each query runs alternately without and with :func:`dataflow_operator.runtime.strategies.fuse.fused`
(the first round warms up and is not counted). Prints each query's median times and the
fused/plain ratio, and the time fusing one query takes (its plan walk and analysis).

    .venv/bin/python bench/fuse_cost.py [--rows 400] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

from dataflow_operator.runtime.session import spark_session
from dataflow_operator.runtime.strategies.fuse import fused

QUERIES = {
    "cross count": "SELECT count(*) FROM a, b, c",
    "cross grouped": "SELECT a.x % 7 AS k, sum(b.x + c.x) FROM a, b, c GROUP BY k",
    "theta left join": "SELECT count(*), sum(b.x) FROM a LEFT JOIN b ON a.x < b.x",
    "equi join, skewed": "SELECT count(*), sum(a.x * b.x) FROM a JOIN b ON a.x % 10 = b.x % 10",
}


def main() -> None:
    """Time each query plain and fused; print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=400, help="rows of each input a, b, c")
    parser.add_argument("--repeats", type=int, default=3, help="counted rounds per query")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = spark_session(app_name="bench-fuse-cost")
    context = spark.sparkContext
    lines = [json.dumps({"x": i}) for i in range(args.rows)]
    for name in "abc":
        frame = spark.read.schema("x BIGINT").json(context.parallelize(lines, 1)).cache()
        frame.createOrReplaceTempView(name)
        frame.count()
    for name, sql in QUERIES.items():
        times: dict[str, list[float]] = {"plain": [], "fused": []}
        for round_ in range(args.repeats + 1):
            for mode, seconds in times.items():
                start = time.perf_counter()
                frame = spark.sql(sql)
                (fused(frame) if mode == "fused" else frame).collect()
                if round_:
                    seconds.append(time.perf_counter() - start)
        plain, guarded = (statistics.median(times[m]) for m in ("plain", "fused"))
        print(
            f"{name:18s} plain {plain:6.2f}s fused {guarded:6.2f}s "
            f"({(guarded / plain - 1) * 100:+.0f} %)",
            flush=True,
        )
    start = time.perf_counter()
    for _ in range(10):
        fused(spark.sql(QUERIES["theta left join"]))
    print(f"fusing one query: {(time.perf_counter() - start) * 100:.0f} ms", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
