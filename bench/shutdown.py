"""Fast shutdown: how long after a drop the replica's CPU falls back to idle.

For each scenario — (a) a triple cross join of ``--rows``-row inputs, (b) a
``--snapshot-rows``-row table snapshot, (c) a divergent ``WITH RECURSIVE`` with the
recursion limits at -1, and (d) two theta left joins over one input's distinct rows,
nested-loop joins that only their fuses stop — one engine runs the heavy dataflow beside
a sibling temporal-filter dataflow (stepping one day per step), waits until the sibling
has hydrated (its first batches start Python workers and compile code for seconds, which
is not the heavy dataflow's CPU) and the heavy one's tasks have run for a while, drops the
heavy one, and prints:

- ``apply``: how long ``PUT /dataflows`` (``Engine.apply``) took to return;
- ``gone``: drop → the dataflow left ``GET /status`` (its last task ended);
- ``idle``: drop → the CPU of the Spark JVM and its descendants (executors, Python
  workers), read from ``/proc/<pid>/stat`` (not self-reported), fell below 0.25 core
  over a 300 ms window; no new step starts from the drop until then, so the sibling's
  batches do not count (a step already running finishes);
- whether the sibling's frontier kept advancing after the drop.

Run from the repository root: ``.venv/bin/python bench/shutdown.py``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.runtime.shutdown_scenarios import (
    HEAVY,
    SIBLING,
    groups_of,
    replica,
    wait_busy,
)

from dataflow_operator.runtime.engine.engine import dataflows_from
from dataflow_operator.runtime.session import spark_session

TICK = os.sysconf("SC_CLK_TCK")
WINDOW = 0.3
IDLE = 0.25
"""Cores below which the Spark processes count as idle (idle queries still poll)."""
SUSTAINED = {"cross": 3.0, "nested-loop": 3.0}
"""Seconds a join's tasks run without a pause before the drop (past its first stages)."""
KINDS = ["cross", "snapshot", "recursion", "nested-loop"]


def _cpu_seconds(root: int) -> float:
    """CPU seconds of ``root`` and its descendant processes, from /proc: each one's utime
    and stime, and its reaped children's (cutime, cstime), so that a Python worker that
    exits does not take its seconds away from the total."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
        times[int(entry)] = sum(int(f) for f in fields[11:15]) / TICK
    total = 0.0
    for pid, seconds in times.items():
        ancestor = pid
        while ancestor > 1 and ancestor != root:
            ancestor = parents.get(ancestor, 1)
        if ancestor == root:
            total += seconds
    return total


def _rate(root: int, seconds: float = WINDOW) -> float:
    before = _cpu_seconds(root)
    time.sleep(seconds)
    return (_cpu_seconds(root) - before) / seconds


def _wait_advancing(running: Any, timeout: float) -> None:
    """Until the sibling has advanced twice: its first batches (hydration) are over."""
    deadline = time.monotonic() + timeout
    seen: set[int] = set()
    while len(seen - {0}) < 2 and time.monotonic() < deadline:
        seen.add(running.frontier(SIBLING))
        time.sleep(0.1)


def _scenario(spark: Any, jvm_pid: int, kind: str, rows: int) -> None:
    with (
        tempfile.TemporaryDirectory(prefix=f"shutdown-{kind}-") as work,
        replica(spark, kind, Path(work), rows) as running,
    ):
        engine = running.engine
        time.sleep(3)
        heavy = engine.running(HEAVY)
        assert heavy is not None
        _wait_advancing(running, timeout=600)
        try:
            wait_busy(spark, groups_of(heavy), timeout=600, sustained=SUSTAINED.get(kind, 0.0))
        except TimeoutError as error:
            flow = next((d for d in engine.report().dataflows if d.name == HEAVY), None)
            print(
                f"{kind:11s} not measured: {error}; heavy's last error: "
                f"{flow.last_error if flow else 'gone'}",
                flush=True,
            )
            return
        time.sleep(2)
        busy = _rate(jvm_pid, 1.0)
        before = running.frontier(SIBLING)
        running.paused.set()  # no new step: the CPU left is the heavy one's (and idle polls)
        dropped_at = time.monotonic()
        engine.apply(dataflows_from([(SIBLING, running.specs[SIBLING])]))
        applied = time.monotonic() - dropped_at
        samples: list[tuple[float, float]] = []  # (window start since the drop, cores)
        gone = None
        while time.monotonic() - dropped_at < 120:
            start = time.monotonic() - dropped_at
            samples.append((start, _rate(jvm_pid)))
            if gone is None and all(d.name != HEAVY for d in engine.report().dataflows):
                gone = time.monotonic() - dropped_at
            if gone is not None and samples[-1][1] <= IDLE:
                break
        idle = None  # the start of the last run of idle windows
        for start, rate in reversed(samples):
            if rate > IDLE:
                break
            idle = start
        running.paused.clear()
        deadline = time.monotonic() + 60
        while running.frontier(SIBLING) <= before and time.monotonic() < deadline:
            time.sleep(0.1)
        advanced = running.frontier(SIBLING) > before
        errors = [e for e in engine.report().dataflows if e.last_error]
        print(
            f"{kind:11s} rows={rows:<10d} busy={busy:4.2f} cores "
            f"apply={applied:6.3f}s "
            f"gone={_fmt(gone)} idle={_fmt(idle)} "
            f"sibling_advanced={advanced} errors={len(errors)}",
            flush=True,
        )


def _fmt(value: float | None) -> str:
    return "  >120s" if value is None else f"{value:6.3f}s"


def main() -> None:
    """Run the three scenarios and print their figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=3000, help="rows of each join input")
    parser.add_argument("--snapshot-rows", type=int, default=10_000_000)
    parser.add_argument("--only", choices=KINDS, default=None)
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = spark_session(app_name="bench-shutdown")
    gateway: Any = spark.sparkContext._gateway
    jvm_pid = int(gateway.proc.pid)
    baselines = []
    for _ in range(5):
        baselines.append(_rate(jvm_pid))
    print(f"JVM pid {jvm_pid}; idle JVM {statistics.median(baselines):.2f} cores", flush=True)
    sizes = {kind: args.rows for kind in KINDS} | {"snapshot": args.snapshot_rows}
    for kind in [args.only] if args.only else KINDS:
        _scenario(spark, jvm_pid, kind, sizes[kind])
    spark.stop()


if __name__ == "__main__":
    main()
