"""Benchmark: an equi-join maintained in Spark state vs recomputed and diffed.

A fact changelog of ``--facts`` rows (default 1,000,000) joined to a dimension of
``--dims`` rows (default 10,000) and grouped, ``SELECT d.name, count(*), sum(f.amount)
FROM facts f JOIN dims d ON f.dim = d.id GROUP BY d.name`` (``--rows``: the joined rows
themselves, no GROUP BY), loaded in one batch (hydration), then ``--batches`` trickle batches
of ``--trickle`` new fact rows (default 1,000) each. Prints the hydration time, the
steady-state time per trickle batch (median of the batches after the first two) and the
input rows per second per core, for the incremental plan (``--strategy incremental``)
or for recompute-and-diff (``--strategy recompute``: the same query forced onto the
GENERAL strategy).

    .venv/bin/python bench/incremental_join.py [--facts N] [--dims N] [--trickle N]
        [--batches B] [--strategy incremental|recompute] [--rows] [--warm-up]

``--warm-up`` warms Spark up first (``runtime.engine.warm_up``), as a replica does before
it says ready: the hydration a dataflow installed on a started replica sees.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from dataflow_operator.api.dataflow import DataflowSpec
from dataflow_operator.core.time import parse_timestamp

T = parse_timestamp("2026-01-01T00:00:00Z")
JOINED = "SELECT f.id, f.amount, d.name FROM facts f JOIN dims d ON f.dim = d.id"
GROUPED = (
    "SELECT d.name, count(*) AS n, sum(f.amount) AS total "
    "FROM facts f JOIN dims d ON f.dim = d.id GROUP BY d.name"
)


def _write(path: Path, rows: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(rows))


def _facts(first: int, count: int, dims: int, at: int, rng: random.Random) -> list[str]:
    return [
        json.dumps(
            {
                "id": i,
                "dim": rng.randrange(dims),
                "amount": rng.randrange(100),
                "time": at,
                "diff": 1,
            }
        )
        + "\n"
        for i in range(first, first + count)
    ]


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--facts", type=int, default=1_000_000)
    parser.add_argument("--dims", type=int, default=10_000)
    parser.add_argument("--trickle", type=int, default=1_000)
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--strategy", choices=["incremental", "recompute"], default="incremental")
    parser.add_argument("--rows", action="store_true", help="the join without GROUP BY")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument(
        "--warm-up",
        action="store_true",
        help="warm Spark up first, as a replica does before it says ready",
    )
    return parser.parse_args()


def _spec(work: Path, grouped: bool) -> DataflowSpec:
    def source(name: str, schema: str) -> dict[str, object]:
        return {
            "name": name,
            "changelog": {"path": str(work / name), "format": "json", "schema": schema},
            "timeline": {"external": "bench"},
        }

    return DataflowSpec.model_validate(
        {
            "cluster": "c",
            "kind": "Index",
            "sources": [
                source("facts", "id BIGINT, dim BIGINT, amount BIGINT"),
                source("dims", "id BIGINT, name STRING"),
            ],
            "sql": GROUPED if grouped else JOINED,
        }
    )


def _measure(args: argparse.Namespace, work: Path) -> tuple[float, float, list[float], int, int]:
    """Install seconds, hydration seconds, seconds per trickle batch, state rows and bytes."""
    from dataflow_operator.runtime.engine.config import EngineConfig
    from dataflow_operator.runtime.engine.engine import Engine, dataflows_from
    from dataflow_operator.runtime.engine.warm_up import warm_up
    from dataflow_operator.runtime.session import spark_session
    from dataflow_operator.runtime.storage import Location

    rng = random.Random(1)
    facts = work / "facts"
    dims = [json.dumps({"id": i, "name": f"d{i}", "time": 1, "diff": 1}) for i in range(args.dims)]
    _write(work / "dims" / "0000.json", [line + "\n" for line in dims])
    _write(facts / "0000.json", _facts(0, args.facts, args.dims, 1, rng))
    spark = spark_session(master=args.master, app_name="bench-incremental-join")
    if args.warm_up:
        assert warm_up(spark, Location.of(work), T) is not None
    engine = Engine(spark, EngineConfig(work / "state", T))
    try:
        started = time.monotonic()
        assert not engine.apply(dataflows_from([("joined", _spec(work, not args.rows))])).failed
        install = time.monotonic() - started
        started = time.monotonic()
        engine.step(T)
        hydration = time.monotonic() - started
        durations = []
        for batch in range(1, args.batches + 1):
            first = args.facts + (batch - 1) * args.trickle
            rows = _facts(first, args.trickle, args.dims, 1 + batch, rng)
            _write(facts / f"{batch:04d}.json", rows)
            started = time.monotonic()
            engine.step(T + batch)
            durations.append(time.monotonic() - started)
        report = engine.report().dataflows[0]
        return install, hydration, durations, report.state_rows, report.state_bytes
    finally:
        engine.close()
        spark.stop()


def main() -> None:
    """Run the benchmark and print its figures."""
    args = _arguments()
    if args.strategy == "recompute":
        from dataflow_operator.runtime.strategies import build

        build._join = lambda *_: None  # falls back to recompute-and-diff
    work = Path(tempfile.mkdtemp(prefix="bench-join-"))
    try:
        install, hydration, durations, state_rows, state_bytes = _measure(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    cores = os.cpu_count() or 1
    steady = statistics.median(durations[2:] or durations)
    shape = "join" if args.rows else "join + GROUP BY"
    warmed = "Spark warmed up first" if args.warm_up else "a fresh Spark session"
    print(f"{shape}, {args.strategy}; history: {args.facts:,} facts x {args.dims:,} dims; {warmed}")
    print(f"hydration: {hydration:.1f} s = {args.facts / hydration / cores:,.0f} rows/s/core")
    print(f"installed → hydrated: {install + hydration:.1f} s (install {install:.1f} s)")
    print(
        f"trickle of {args.trickle:,} rows: per batch {', '.join(f'{d:.2f}' for d in durations)}"
        f" s; steady {steady:.2f} s = {args.trickle / steady / cores:,.0f} rows/s/core"
    )
    print(f"state rows {state_rows:,}, bytes {state_bytes:,}")


if __name__ == "__main__":
    main()
