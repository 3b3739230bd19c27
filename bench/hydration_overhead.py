"""What hydration tracking costs: the same snapshot batch with tracking off and on.

Runs a join + aggregate streaming dataflow over a JSON snapshot, alternating runs without
and with hydration tracking (HydrationMonitor + StreamingQueryProbe at the default
interval), each from a fresh checkpoint, in one Spark session. Prints each run's batch
time (Spark's ``triggerExecution``), the median ratio on/off, and the time the tracking
itself spent in the driver (sum of its polls) as a fraction of batch time — the part
that is the tracking's own cost, free of the machine's noise.

Budget: at most 1 % of batch time.

    .venv/bin/python bench/hydration_overhead.py [--rows 200000] [--files 4] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from dataflow_operator.core.hydration import Progress
from dataflow_operator.core.time import Frontier
from dataflow_operator.runtime.hydration.monitor import HydrationMonitor
from dataflow_operator.runtime.hydration.probe import StreamingQueryProbe
from dataflow_operator.runtime.hydration.tracker import HydrationTracker
from dataflow_operator.runtime.session import spark_session

SQL = (
    "SELECT d.name, count(*) AS c, sum(e.v) AS s "
    "FROM bench_events e JOIN bench_dims d ON e.k = d.k GROUP BY d.name"
)


class TimedProbe:
    """A probe that adds up the time its polls take."""

    def __init__(self, probe: StreamingQueryProbe) -> None:
        self.probe = probe
        self.seconds = 0.0
        self.cpu_seconds = 0.0
        self.polls = 0

    def poll(self) -> Progress:
        started, cpu = time.perf_counter(), time.thread_time()
        try:
            return self.probe.poll()
        finally:
            self.seconds += time.perf_counter() - started
            self.cpu_seconds += time.thread_time() - cpu
            self.polls += 1


def write_snapshot(directory: Path, files: int, rows: int) -> None:
    """``files`` JSON files of ``rows`` rows each."""
    directory.mkdir(parents=True)
    for index in range(files):
        with (directory / f"part-{index}.json").open("w") as out:
            for i in range(rows):
                out.write(json.dumps({"k": i % 997, "v": i, "pad": "x" * 40}) + "\n")


def _count(batch: DataFrame, _: int) -> None:
    batch.count()


def jvm_cpu_seconds(pid: int) -> float:
    """User + system CPU the driver JVM has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_once(
    spark: SparkSession, work: Path, run: int, track: bool, interval: float
) -> tuple[float, float, TimedProbe | None, int | None]:
    """One snapshot batch: its seconds, the JVM's CPU seconds, the probe, hydration ms."""
    pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    cpu_before = jvm_cpu_seconds(pid)
    frame = spark.sql(SQL)
    tracker = HydrationTracker(f"bench-{run}", Frontier.at(0))
    monitor = HydrationMonitor(interval=interval)
    query = (
        frame.writeStream.outputMode("update")
        .foreachBatch(_count)
        .option("checkpointLocation", str(work / f"checkpoint-{run}"))
        .start()
    )
    probe = TimedProbe(StreamingQueryProbe(query)) if track else None
    monitor.watch(tracker, probe)
    try:
        while query.lastProgress is None:
            if query.exception() is not None:
                raise RuntimeError(str(query.exception()))
            time.sleep(0.02)
        tracker.observe_frontier(Frontier.at(1))
        progress = query.lastProgress
    finally:
        query.stop()
        monitor.stop()
    seconds = progress["durationMs"]["triggerExecution"] / 1000
    cpu = jvm_cpu_seconds(pid) - cpu_before
    return seconds, cpu, probe, tracker.status().hydration_time_ms


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000, help="rows per file")
    parser.add_argument("--files", type=int, default=4, help="files in the snapshot")
    parser.add_argument("--repeats", type=int, default=3, help="runs with and without")
    parser.add_argument("--interval", type=float, default=0.5, help="poll interval (s)")
    args = parser.parse_args(argv)

    spark = spark_session(app_name="bench-hydration-overhead")
    spark.sparkContext.setLocalProperty("spark.ui.showConsoleProgress", "false")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        write_snapshot(work / "in", args.files, args.rows)
        spark.range(997).selectExpr(
            "CAST(id AS INT) AS k", "CAST(id AS STRING) AS name"
        ).createOrReplaceTempView("bench_dims")
        spark.readStream.schema("k INT, v BIGINT, pad STRING").json(
            str(work / "in")
        ).createOrReplaceTempView("bench_events")

        for warm_up in range(2):  # JIT, class loading
            run_once(spark, work, -1 - warm_up, warm_up == 1, args.interval)
        off: list[float] = []
        on: list[float] = []
        cpu_off: list[float] = []
        cpu_on: list[float] = []
        tracking_seconds: list[float] = []
        tracking_cpu: list[float] = []
        run = 1
        for repeat in range(args.repeats):
            # alternate the order so that drift in the machine's load hits both sides
            for track in (False, True) if repeat % 2 == 0 else (True, False):
                seconds, cpu, probe, hydration_ms = run_once(spark, work, run, track, args.interval)
                run += 1
                if probe is None:
                    off.append(seconds)
                    cpu_off.append(cpu)
                    print(
                        f"run {run - 1}: tracking off  batch {seconds:7.3f} s  jvm cpu {cpu:6.2f} s"
                    )
                else:
                    on.append(seconds)
                    cpu_on.append(cpu)
                    tracking_seconds.append(probe.seconds / seconds)
                    tracking_cpu.append(probe.cpu_seconds / seconds)
                    print(
                        f"run {run - 1}: tracking on   batch {seconds:7.3f} s  jvm cpu {cpu:6.2f} s  "
                        f"polls {probe.polls:3d} taking {probe.seconds * 1000:7.1f} ms "
                        f"(cpu {probe.cpu_seconds * 1000:5.1f} ms)  "
                        f"hydrationTime {hydration_ms} ms"
                    )
    spark.stop()

    ratio = statistics.median(on) / statistics.median(off)
    cost = statistics.median(tracking_seconds)
    cpu = statistics.median(tracking_cpu)
    rows = args.rows * args.files
    print(f"rows in snapshot:                 {rows}")
    print(f"median batch time, tracking off:  {statistics.median(off):.3f} s")
    print(f"median batch time, tracking on:   {statistics.median(on):.3f} s")
    print(f"batch time ratio on/off:          {ratio:.4f}  ({(ratio - 1) * 100:+.2f} %)")
    print(
        f"tracking's polls / batch time:    {cost * 100:.3f} % wall (incl. waiting on Spark's locks)"
    )
    print(f"tracking's CPU / batch time:      {cpu * 100:.3f} %  (budget 1 %)")
    jvm_ratio = statistics.median(cpu_on) / statistics.median(cpu_off)
    print(f"driver JVM CPU per batch on/off:  {jvm_ratio:.4f}  ({(jvm_ratio - 1) * 100:+.2f} %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
