"""Benchmark: an equi-join maintained in Spark state vs recomputed and diffed.

A fact changelog of ``--facts`` rows (default 1,000,000) joined to a dimension of
``--dims`` rows (default 10,000) and grouped, ``SELECT d.name, count(*), sum(f.amount)
FROM facts f JOIN dims d ON f.dim = d.id GROUP BY d.name`` (``--rows``: the joined rows
themselves, no GROUP BY), loaded in one batch (hydration), then ``--batches`` trickle batches
of ``--trickle`` new fact rows (default 1,000) each. Prints the hydration time, the
steady-state time per trickle batch (median of the batches after the first two; and
their mean, which counts the occasional batch that merges a join's fragments or whose
step compacts the source's ingested collection) and the input rows per second per core,
for the incremental plan (``--strategy incremental``) or for recompute-and-diff
(``--strategy recompute``: the same query forced onto the GENERAL strategy).

    .venv/bin/python bench/incremental_join.py [--facts N] [--dims N] [--trickle N]
        [--batches B] [--strategy incremental|recompute] [--rows] [--warm-up]

``--warm-up`` warms Spark up first (``runtime.engine.warm_up``), as a replica does before
it says ready: the hydration a dataflow installed on a started replica sees.

``--lag``: the freshness lag instead. The same query over two ``table`` sources on the
wall clock (one Spark batch a step, as a replica runs), ``--facts`` rows of history to
begin with, then a feeder inserts ``--rate`` fact rows a second until the history has
grown ``--growth`` times (files written beforehand, moved in every 0.25 s: making rows
does not take the dataflow's cores); after each step, the lag (the wall clock minus the
dataflow's frontier). Prints the lag's median per tenth of the growth: flat means the
cost of a step follows what changed, not the history; at a high ``--rate``, a lag that
settles means the dataflow keeps up with that input rate.

    .venv/bin/python bench/incremental_join.py --lag [--facts N] [--rate R] [--growth G]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from dataflow_operator.api.dataflow import DataflowSpec
from dataflow_operator.core.time import parse_timestamp

if TYPE_CHECKING:
    from dataflow_operator.runtime.engine.engine import Engine

T = parse_timestamp("2026-01-01T00:00:00Z")
JOINED = "SELECT f.id, f.amount, d.name FROM facts f JOIN dims d ON f.dim = d.id"
GROUPED = (
    "SELECT d.name, count(*) AS n, sum(f.amount) AS total "
    "FROM facts f JOIN dims d ON f.dim = d.id GROUP BY d.name"
)


FACTS = "id BIGINT, dim BIGINT, amount BIGINT"
DIMS = "id BIGINT, name STRING"


def _write(path: Path, rows: list[str]) -> None:
    """Write a changelog file whole at once, as a producer should: under a hidden name,
    then renamed (the source may list the directory meanwhile: a Spark query polls it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    hidden = path.with_name(f".{path.name}.tmp")
    hidden.write_text("".join(rows))
    hidden.rename(path)


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


def _progress(at: int) -> list[str]:
    """A dimension changelog file that changes nothing but says the dimension is complete
    up to ``at``: a row inserted and deleted at ``at`` (a changelog source's upper is its
    newest time + 1, and the join's output waits for every input's upper)."""
    row = {"id": -1, "name": "none", "time": at}
    return [json.dumps(row | {"diff": diff}) + "\n" for diff in (1, -1)]


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
    parser.add_argument("--lag", action="store_true", help="the freshness lag as history grows")
    parser.add_argument("--rate", type=int, default=300, help="--lag: fact rows inserted a second")
    parser.add_argument("--growth", type=int, default=10, help="--lag: how many times --facts")
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
                source("facts", FACTS),
                source("dims", DIMS),
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
            _write(work / "dims" / f"{batch:04d}.json", _progress(1 + batch))
            started = time.monotonic()
            engine.step(T + batch)
            durations.append(time.monotonic() - started)
        _check_output(engine, args, args.facts + args.batches * args.trickle)
        report = engine.report().dataflows[0]
        return install, hydration, durations, report.state_rows, report.state_bytes
    finally:
        engine.close()
        spark.stop()


def _check_output(engine: Engine, args: argparse.Namespace, facts: int) -> None:
    """Every fact reached the output (the figures measure the whole join, not input that
    waits for an upper)."""
    rows = engine.peek("joined").rows
    joined = sum(row[-1] for row in rows) if args.rows else sum(row[1] for row in rows)
    if joined != facts:
        raise SystemExit(f"the output holds {joined:,} of the {facts:,} facts")


def _table_spec(work: Path) -> DataflowSpec:
    return DataflowSpec.model_validate(
        {
            "cluster": "c",
            "kind": "Index",
            "sources": [
                {"name": "facts", "table": {"path": str(work / "facts"), "schema": FACTS}},
                {"name": "dims", "table": {"path": str(work / "dims"), "schema": DIMS}},
            ],
            "sql": GROUPED,
        }
    )


def _fact_rows(first: int, count: int, dims: int, rng: random.Random) -> list[dict[str, object]]:
    return [
        {"id": i, "dim": rng.randrange(dims), "amount": rng.randrange(100)}
        for i in range(first, first + count)
    ]


FEED_PERIOD = 0.25
"""Seconds between two files the feeder moves into the facts table."""


def _staged(args: argparse.Namespace, staging: Path, rng: random.Random) -> list[tuple[Path, int]]:
    """The facts the feeder will insert, written beforehand (so that making them does not
    take the cores the dataflow runs on): one JSON-lines file per :data:`FEED_PERIOD`,
    with its row count."""
    from dataflow_operator.runtime.inserts import insert_rows

    per_file = max(1, round(args.rate * FEED_PERIOD))
    staged: list[tuple[Path, int]] = []
    first, target = args.facts, args.facts * args.growth
    while first < target:
        count = min(per_file, target - first)
        rows = _fact_rows(first, count, args.dims, rng)
        staged.append((Path(str(insert_rows(staging / f"{len(staged):06d}", rows))), count))
        first += count
    return staged


def _lag(args: argparse.Namespace, work: Path) -> list[tuple[int, float, float]]:
    """(history rows, lag seconds, step seconds) after each wall-clock step while a feeder
    inserts ``--rate`` fact rows a second, until the history is ``--growth`` x ``--facts``."""
    from dataflow_operator.runtime.engine.config import EngineConfig
    from dataflow_operator.runtime.engine.engine import Engine, dataflows_from
    from dataflow_operator.runtime.engine.warm_up import warm_up
    from dataflow_operator.runtime.inserts import insert_rows
    from dataflow_operator.runtime.session import spark_session
    from dataflow_operator.runtime.storage import Location

    rng = random.Random(1)
    insert_rows(work / "dims", [{"id": i, "name": f"d{i}"} for i in range(args.dims)])
    insert_rows(work / "facts", _fact_rows(0, args.facts, args.dims, rng))
    staged = _staged(args, work / "staging", rng)
    spark = spark_session(master=args.master, app_name="bench-incremental-join-lag")
    assert warm_up(spark, Location.of(work), _now_ms()) is not None
    engine = Engine(spark, EngineConfig(work / "state", _now_ms()))
    inserted = args.facts
    target = args.facts * args.growth
    stop = threading.Event()

    def feed() -> None:
        # As `insert` does: a new name in the table's directory, the file whole at once.
        nonlocal inserted
        for path, count in staged:
            if stop.wait(FEED_PERIOD):
                return
            path.rename(work / "facts" / f"{time.time_ns():020d}-{path.parent.name}.json")
            inserted += count

    samples: list[tuple[int, float, float]] = []
    try:
        assert not engine.apply(dataflows_from([("joined", _table_spec(work))])).failed
        engine.step(_now_ms())  # hydration
        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        while feeder.is_alive() or not samples or samples[-1][0] < target:
            history = inserted
            began = time.monotonic()
            engine.step(_now_ms(), complete=False)
            took = time.monotonic() - began
            frontier = engine.report().dataflows[0].frontier
            lag = (_now_ms() - frontier[0]) / 1000 if frontier else float("inf")
            samples.append((history, lag, took))
        return samples
    finally:
        stop.set()
        engine.close()
        spark.stop()


SETTLING_STEPS = 3
"""Steps right after hydration, left out of the figures: they catch up on the input
inserted while the dataflow hydrated."""


def _now_ms() -> int:
    return int(time.time() * 1000)


def _print_lag(args: argparse.Namespace, samples: list[tuple[int, float, float]]) -> None:
    span = args.facts * (args.growth - 1)
    print(
        f"join + GROUP BY on the wall clock: history {args.facts:,} → "
        f"{args.facts * args.growth:,} facts x {args.dims:,} dims at {args.rate:,} rows/s; "
        f"{len(samples)} steps (the first {SETTLING_STEPS}, after hydration, left out)"
    )
    tenths: list[list[tuple[float, float]]] = [[] for _ in range(10)]
    for history, lag, took in samples[SETTLING_STEPS:]:
        tenth = min(9, max(0, (history - args.facts) * 10 // max(1, span)))
        tenths[tenth].append((lag, took))
    print("history (facts)   lag p50   lag max   step p50")
    for index, tenth in enumerate(tenths):
        if not tenth:
            continue
        lags = [lag for lag, _ in tenth]
        steps = [took for _, took in tenth]
        history = args.facts + span * index // 10
        print(
            f"{history:>15,}   {statistics.median(lags):6.2f} s  {max(lags):6.2f} s  "
            f"{statistics.median(steps):6.2f} s"
        )
    first = [lag for lag, _ in next(t for t in tenths if t)]
    last = [lag for lag, _ in next(t for t in reversed(tenths) if t)]
    ratio = statistics.median(last) / statistics.median(first)
    print(f"lag p50, last tenth / first tenth: {ratio:.2f}x")
    cores = os.cpu_count() or 1
    print(f"input: {args.rate:,} rows/s on {cores} cores = {args.rate / cores:,.0f} rows/s/core")


def main() -> None:
    """Run the benchmark and print its figures."""
    args = _arguments()
    if args.lag:
        work = Path(tempfile.mkdtemp(prefix="bench-join-lag-"))
        try:
            _print_lag(args, _lag(args, work))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return
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
    mean = statistics.fmean(durations[2:] or durations)  # with the merges and releases
    shape = "join" if args.rows else "join + GROUP BY"
    warmed = "Spark warmed up first" if args.warm_up else "a fresh Spark session"
    print(f"{shape}, {args.strategy}; history: {args.facts:,} facts x {args.dims:,} dims; {warmed}")
    print(f"hydration: {hydration:.1f} s = {args.facts / hydration / cores:,.0f} rows/s/core")
    print(f"installed → hydrated: {install + hydration:.1f} s (install {install:.1f} s)")
    print(
        f"trickle of {args.trickle:,} rows: per batch {', '.join(f'{d:.2f}' for d in durations)}"
        f" s; steady {steady:.2f} s = {args.trickle / steady / cores:,.0f} rows/s/core;"
        f" mean {mean:.2f} s = {args.trickle / mean / cores:,.0f} rows/s/core"
    )
    print(f"state rows {state_rows:,}, bytes {state_bytes:,}")


if __name__ == "__main__":
    main()
