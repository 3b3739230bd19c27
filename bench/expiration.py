"""Benchmark: state and batch cost of a 30-day temporal filter, with and without expiration.

Feeds ``--rows`` rows (default 1,000,000) through ``SELECT … WHERE mz_now() <= event_ts
+ INTERVAL '30 days'`` in ``--batches`` batches, one simulated day apart, each row's
``event_ts`` within the day before its batch (fresh rows). Runs it twice on the same
Spark session: a replica without expiration, and one with a 20-day expiration offset.
Prints state rows and bytes (Spark's state operator progress), batch wall time and the
CPU time of the Spark driver JVM and its Python workers, and the ratios.

    .venv/bin/python bench/expiration.py [--rows N] [--batches B]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from dataflow_operator.api.dataflow import DataflowSpec
from dataflow_operator.core.durations import Duration, parse_duration
from dataflow_operator.core.time import format_timestamp, parse_timestamp

DAY = 86_400_000
T = parse_timestamp("2026-01-01T00:00:00Z")
SQL = "SELECT id, event_ts FROM events WHERE mz_now() <= event_ts + INTERVAL '30 days'"


@dataclass
class Figures:
    """What one run measured."""

    label: str
    state_rows: int = 0
    state_bytes: int = 0
    sst_bytes: int = 0
    wall_s: float = 0.0
    cpu_s: float = 0.0
    output_rows: int = 0


def _ticks() -> int:
    return os.sysconf("SC_CLK_TCK")


def _process_tree_cpu(root: int) -> float:
    """CPU seconds of ``root`` and all its live descendants (plus reaped children)."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        pid = int(entry.name)
        parents[pid] = int(fields[1])
        utime, stime, cutime, cstime = (int(f) for f in fields[11:15])
        times[pid] = (utime + stime + cutime + cstime) / _ticks()
    total, frontier = 0.0, [root]
    while frontier:
        pid = frontier.pop()
        total += times.get(pid, 0.0)
        frontier.extend(child for child, parent in parents.items() if parent == pid)
    return total


def _jvm_pid(spark: object) -> int:
    gateway = spark.sparkContext._gateway  # type: ignore[attr-defined]
    process = getattr(gateway, "proc", None)
    if process is not None:
        return int(process.pid)
    return int(spark.sparkContext._jvm.ProcessHandle.current().pid())  # type: ignore[attr-defined]


def run_once(
    spark: object, label: str, offset: Duration | None, *, rows: int, batches: int, work: Path
) -> Figures:
    """One replica run over the generated batches; returns its figures."""
    from dataflow_operator.runtime.engine.config import EngineConfig
    from dataflow_operator.runtime.engine.engine import Engine, dataflows_from
    from dataflow_operator.runtime.inserts import insert_rows

    root = work / label.replace(" ", "-")
    shutil.rmtree(root, ignore_errors=True)
    events = root / "events"
    events.mkdir(parents=True)
    spec = DataflowSpec.model_validate(
        {
            "cluster": "bench",
            "kind": "Index",
            "sources": [
                {
                    "name": "events",
                    "table": {"path": str(events), "schema": "id BIGINT, event_ts TIMESTAMP"},
                }
            ],
            "sql": SQL,
        }
    )
    engine = Engine(spark, EngineConfig(root / "state", T, offset))  # type: ignore[arg-type]
    result = engine.apply(dataflows_from([("recent", spec)]))
    if result.failed:
        raise SystemExit(f"bench: {result.failed}")
    running = engine.running("recent")
    assert running is not None
    figures = Figures(label)
    pid = _jvm_pid(spark)
    generator = random.Random(42)
    per_batch = rows // batches
    next_id = 0
    for batch in range(batches):
        now = T + batch * DAY
        count = per_batch if batch < batches - 1 else rows - next_id
        insert_rows(
            events,
            [{"id": next_id + i, "event_ts": now - generator.randrange(DAY)} for i in range(count)],
        )
        next_id += count
        cpu0, wall0 = _process_tree_cpu(pid), time.monotonic()
        engine.step(now)
        if running.failed:
            raise SystemExit(f"bench: {running.status.last_error}")
        if batch > 0:  # the first batch pays for starting Python workers: not counted
            figures.wall_s += time.monotonic() - wall0
            figures.cpu_s += _process_tree_cpu(pid) - cpu0
        print(
            f"  {label}: batch {batch + 1}/{batches} at {format_timestamp(now)}: "
            f"state rows {running.status.state_rows}",
            file=sys.stderr,
        )
    for operator in running.state_metrics():
        figures.state_rows += int(operator.get("numRowsTotal", 0))
        figures.state_bytes += int(operator.get("memoryUsedBytes", 0))
        figures.sst_bytes += int(operator.get("customMetrics", {}).get("rocksdbSstFileSize", 0))
    stored = running.store.read()
    figures.output_rows = 0 if stored is None else stored.num_rows
    engine.close()
    return figures


def main() -> int:
    """Run both configurations and print the figures and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--offset", type=parse_duration, default=parse_duration("20d"))
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from dataflow_operator.runtime.session import spark_session

    spark = spark_session(
        app_name="bench-expiration", conf={"spark.ui.showConsoleProgress": "false"}
    )
    work = Path(tempfile.mkdtemp(prefix="bench-expiration-"))
    try:
        plain = run_once(spark, "no offset", None, rows=args.rows, batches=args.batches, work=work)
        expiring = run_once(
            spark,
            f"offset {args.offset}",
            args.offset,
            rows=args.rows,
            batches=args.batches,
            work=work,
        )
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(f"{args.rows} rows in {args.batches} batches through a 30-day temporal filter")
    print(
        f"{'':14}{'state rows':>12}{'state bytes':>14}{'sst bytes':>12}{'batch s':>10}{'cpu s':>9}"
    )
    for f in (plain, expiring):
        print(
            f"{f.label:14}{f.state_rows:>12}{f.state_bytes:>14}{f.sst_bytes:>12}"
            f"{f.wall_s:>10.2f}{f.cpu_s:>9.2f}"
        )

    def ratio(a: float, b: float) -> str:
        return f"{a / b:.3f}x" if b else "n/a"

    print(
        f"{'ratio':14}{ratio(expiring.state_rows, plain.state_rows):>12}"
        f"{ratio(expiring.state_bytes, plain.state_bytes):>14}"
        f"{ratio(expiring.sst_bytes, plain.sst_bytes):>12}"
        f"{ratio(expiring.wall_s, plain.wall_s):>10}{ratio(expiring.cpu_s, plain.cpu_s):>9}"
    )
    print(
        f"(batch and cpu exclude the first batch; output rows: {plain.output_rows} vs {expiring.output_rows})"
    )
    if args.json:
        print(json.dumps({"plain": plain.__dict__, "expiring": expiring.__dict__}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
