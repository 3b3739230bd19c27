"""Benchmark: how fresh a replica's answers are (issue 15's targets). Prints figures.

1. **insert → +1**: ``dataflow-operator run`` on the wall clock with ``--tick`` (default
   100ms) in a subprocess, its stdout read line by line; ``--inserts`` times, the time from
   ``dataflow-operator insert`` returning to the row's ``+1`` line on stdout (p50, p90).
   Timed twice: from the run's first output on, and once it has run ``--running-for``
   seconds (default 60; the JVM compiles and the Python workers start in the first
   minute). Target: p50 ≤ 0.5 s, p90 ≤ 1 s.
2. **replica**: ``dataflow-operator replica`` in a subprocess: ``/healthz`` after process
   start (target ≤ 2 s), the first ``PUT /dataflows`` accepted (Spark up), then a one-row
   dataflow installed on the started replica: from its ``PUT`` to ``GET /status`` saying
   hydrated (target ≤ 2 s); then another one-row dataflow once the replica has run
   ``--running-for`` seconds. The replica warms Spark up before it accepts a ``PUT``;
   ``--no-warm-up`` starts it without (the first dataflow then pays for Spark's warm-up).
3. ``--make-run``: the wall time of ``make run`` (target ≤ 90 s).
4. ``--profile [BATCHES]``: a one-row dataflow in this process (``local[2]``), one
   engine step a simulated second, stepped as on the wall clock (one Spark batch a
   step), a new row every other step: each Spark batch's ``durationMs`` parts and its
   engine step's wall time, then the parts' medians, largest first.

    .venv/bin/python bench/freshness.py [--inserts 10] [--tick 100ms] [--running-for 60]
        [--make-run] [--profile [BATCHES]] [--skip insert|replica] [--no-warm-up]

The machine is shared (2 cores, other agents): figures vary from run to run.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import queue
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
CLI = str(BIN / "dataflow-operator")
SQL = "SELECT id, event_ts FROM events WHERE mz_now() <= event_ts + INTERVAL '30 days'"
SCHEMA = "id INT, event_ts TIMESTAMP"


def _spec(table: Path) -> dict[str, Any]:
    return {
        "cluster": "default",
        "kind": "Subscribe",
        "sources": [{"name": "events", "table": {"path": str(table), "schema": SCHEMA}}],
        "sql": SQL,
    }


def _manifest(table: Path, path: Path) -> Path:
    document = {
        "apiVersion": "dataflow.dev/v1alpha1",
        "kind": "Dataflow",
        "metadata": {"name": "fresh"},
        "spec": _spec(table),
    }
    path.write_text(json.dumps(document))  # JSON is YAML
    return path


def _row(i: int) -> str:
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return json.dumps({"id": i, "event_ts": now})


def _insert(table: Path, i: int) -> None:
    subprocess.run([CLI, "insert", str(table), _row(i)], check=True, capture_output=True)


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "DATAFLOW_LOG_FORMAT": "json",
    }


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


@contextmanager
def _process(
    argv: list[str], log: Path, stdout: int | None = None
) -> Iterator[subprocess.Popen[str]]:
    with log.open("w") as err:
        process = subprocess.Popen(argv, env=_env(), stdout=stdout, stderr=err, text=True)
        try:
            yield process
        finally:
            process.terminate()
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _report_inserts(label: str, latencies: list[float]) -> None:
    shown = " ".join(f"{x:.2f}" for x in latencies)
    print(f"insert → +1 line, {label}: {shown} s")
    print(
        f"  p50 {_percentile(latencies, 0.5):.2f} s   p90 {_percentile(latencies, 0.9):.2f} s"
        "   (target p50 ≤ 0.5 s, p90 ≤ 1 s)"
    )


def insert_to_output(work: Path, inserts: int, tick: str, running_for: float) -> None:
    """Figure 1: insert returning → the row's +1 line on run's stdout.

    Timed twice: from the first output on (the run just started: its JVM still compiles
    and its Python workers start), and once the run has run ``running_for`` seconds.
    """
    table = work / "events"
    manifest = _manifest(table, work / "fresh.yaml")
    status = work / "status.json"
    _insert(table, -1)  # the snapshot: one row
    argv = [CLI, "run", str(manifest), "--tick", tick, "--expiration-offset", "0"]
    argv += ["--state-dir", str(work / "run-state"), "--status-file", str(status)]
    lines: queue.Queue[tuple[float, str]] = queue.Queue()
    began = time.monotonic()
    with _process(argv, work / "run.log", subprocess.PIPE) as process:
        assert process.stdout is not None
        stdout = process.stdout

        def read() -> None:
            for line in stdout:
                lines.put((time.monotonic(), line.rstrip("\n")))

        threading.Thread(target=read, daemon=True).start()
        _wait_for_id(lines, -1, began + 300)
        print(f"run: first output (the snapshot row) {time.monotonic() - began:.1f} s after start")
        phases: list[tuple[str, list[float]]] = []
        pauses = random.Random(15)
        for phase in ("from the first output on", f"after {running_for:.0f} s of running"):
            if phases:
                time.sleep(max(0.0, began + running_for - time.monotonic()))
            latencies: list[float] = []
            for i in range(len(phases) * inserts, (len(phases) + 1) * inserts):
                # A random pause: an insert lands anywhere in a step, not always at the
                # same point after the last output (the latency depends on where).
                time.sleep(0.3 + pauses.random())
                _insert(table, i)
                returned = time.monotonic()
                latencies.append(_wait_for_id(lines, i, returned + 60) - returned)
            phases.append((f"{inserts} inserts {phase}, tick {tick}", latencies))
        if process.poll() is not None:
            sys.exit(f"run exited {process.returncode}; see {work / 'run.log'}")
    for label, latencies in phases:
        _report_inserts(label, latencies)


def _wait_for_id(lines: queue.Queue[tuple[float, str]], row_id: int, deadline: float) -> float:
    while True:
        try:
            at, line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            sys.exit(f"no +1 line for id {row_id} in time")
        fields = line.split("\t")
        if len(fields) >= 3 and fields[1] == "1" and fields[2] == str(row_id):
            return at


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _call(port: int, path: str, method: str = "GET", body: Any = None) -> tuple[int, Any]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        data = None if body is None else json.dumps(body)
        connection.request(method, path, body=data)
        response = connection.getresponse()
        text = response.read().decode()
        kind = response.getheader("Content-Type", "")
        return response.status, json.loads(text) if "json" in kind else text
    finally:
        connection.close()


def _until(condition: Any, deadline: float, pause: float = 0.02) -> float:
    while time.monotonic() < deadline:
        try:
            if condition():
                return time.monotonic()
        except OSError:
            pass
        time.sleep(pause)
    sys.exit("timed out")


def _hydrate(port: int, dataflows: list[dict[str, Any]]) -> tuple[float, float, Any]:
    """PUT ``dataflows``; the seconds to the PUT's answer and to the last one hydrated,
    and that one's status."""
    name = dataflows[-1]["name"]
    sent = time.monotonic()
    code, result = _call(port, "/dataflows", "PUT", {"version": "v1", "dataflows": dataflows})
    answered = time.monotonic()
    if code != 200 or result.get("failed"):
        sys.exit(f"PUT /dataflows: {code} {result}")

    def status() -> Any:
        reports = _call(port, "/status")[1]["dataflows"]
        return next((r for r in reports if r["name"] == name), {})

    done = _until(lambda: bool(status().get("hydrated")), sent + 120)
    return answered - sent, done - sent, status()


def replica(work: Path, tick: str, running_for: float, warm_up: bool = True) -> None:
    """Figure 2: /healthz after start, Spark up, a one-row dataflow hydrated after PUT:
    once as soon as the replica accepts a PUT, once after ``running_for`` seconds."""
    tables = [work / "replica-events", work / "replica-events-2"]
    for table in tables:
        _insert(table, 0)
    port = _free_port()
    argv = [CLI, "replica", "--control-address", f"127.0.0.1:{port}", "--tick", tick]
    argv += ["--state-dir", str(work / "replica-state"), "--expiration-offset", "0"]
    argv += [] if warm_up else ["--no-warm-up"]
    empty = {"version": "v1", "dataflows": []}
    began = time.monotonic()
    installed: list[dict[str, Any]] = []
    timings = []
    with _process(argv, work / "replica.log") as process:
        deadline = began + 300
        healthy = _until(lambda: _call(port, "/healthz")[0] == 200, deadline, 0.01)
        up = _until(lambda: _call(port, "/dataflows", "PUT", empty)[0] == 200, deadline, 0.1)
        for k, table in enumerate(tables):
            if k:
                time.sleep(max(0.0, began + running_for - time.monotonic()))
            installed.append({"name": f"one-row-{k}", "spec": _spec(table)})
            timings.append((time.monotonic() - began, *_hydrate(port, installed)))
        if process.poll() is not None:
            sys.exit(f"replica exited {process.returncode}; see {work / 'replica.log'}")
    print(f"replica: /healthz {healthy - began:.2f} s after process start (target ≤ 2 s)")
    print(f"replica: engine up (first PUT accepted) {up - began:.1f} s after process start")
    for at, answered, hydrated, report in timings:
        print(
            f"replica: a one-row dataflow PUT {at:.0f} s after process start hydrated "
            f"{hydrated:.2f} s after its PUT (PUT answered in {answered:.2f} s; "
            f"hydrationTimeMs {report.get('hydrationTimeMs')}) (target ≤ 2 s)"
        )


def make_run() -> None:
    """Figure 3: make run's wall time."""
    began = time.monotonic()
    subprocess.run(["make", "run"], cwd=ROOT, check=True, capture_output=True)
    print(f"make run: {time.monotonic() - began:.1f} s (target ≤ 90 s)")


def profile(work: Path, batches: int) -> None:
    """Where a one-row batch's time goes: Spark's durationMs parts, per batch."""
    from dataflow_operator.api.dataflow import DataflowSpec
    from dataflow_operator.api.protocol import DesiredDataflow, DesiredDataflows
    from dataflow_operator.core.time import parse_timestamp
    from dataflow_operator.runtime.engine.config import EngineConfig
    from dataflow_operator.runtime.engine.engine import Engine
    from dataflow_operator.runtime.session import spark_session

    table = work / "profile-events"
    _insert(table, 0)
    spark = spark_session(master="local[2]", app_name="freshness-profile")
    spark.sparkContext.setLogLevel("ERROR")
    start = parse_timestamp(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    engine = Engine(spark, EngineConfig(state_dir=str(work / "profile-state"), start_time=start))
    try:
        spec = DataflowSpec.model_validate(_spec(table))
        engine.apply(DesiredDataflows(dataflows=[DesiredDataflow(name="p", spec=spec)]))
        seen = -1
        totals: dict[str, list[int]] = {}
        steps = []
        for k in range(batches):
            if k % 2 == 1:
                _insert(table, k)  # every other batch has one new row
            began = time.monotonic()
            engine.step(start + (k + 1) * 1000, complete=False)  # as on the wall clock
            steps.append(time.monotonic() - began)
            running = engine.running("p")
            assert running is not None and running.query is not None
            for progress in running.query.recentProgress:
                if progress["batchId"] <= seen:
                    continue
                seen = progress["batchId"]
                parts = dict(progress["durationMs"])
                rows = progress["numInputRows"]
                print(f"batch {seen} rows {rows} step {steps[-1] * 1000:.0f} ms  {parts}")
                if seen > 0:  # the first batch (the snapshot) costs more: left out
                    for key, value in parts.items():
                        totals.setdefault(key, []).append(int(value))
        print(f"engine step wall time, median: {statistics.median(steps[1:]) * 1000:.0f} ms")
        print("durationMs parts, median over batches after the first, largest first:")
        medians = {key: statistics.median(values) for key, values in totals.items()}
        for key, value in sorted(medians.items(), key=lambda item: -item[1]):
            print(f"  {key:24} {value:8.0f} ms")
    finally:
        engine.close()
        spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inserts", type=int, default=10, help="inserts timed (default 10)")
    parser.add_argument("--tick", default="100ms", help="the replica's tick (default 100ms)")
    parser.add_argument(
        "--running-for",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="time the second round once run/replica has run this long (default 60)",
    )
    parser.add_argument("--make-run", action="store_true", help="also time make run")
    parser.add_argument(
        "--no-warm-up", action="store_true", help="start the replica without its warm-up"
    )
    parser.add_argument(
        "--profile",
        type=int,
        metavar="BATCHES",
        nargs="?",
        const=8,
        default=0,
        help="also profile a one-row dataflow's batches (default 8)",
    )
    parser.add_argument(
        "--skip",
        action="append",
        default=[],
        choices=["insert", "replica"],
        help="leave out a part (repeatable)",
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="freshness-"))
    try:
        if "insert" not in args.skip:
            insert_to_output(work, args.inserts, args.tick, args.running_for)
        if "replica" not in args.skip:
            replica(work, args.tick, args.running_for, warm_up=not args.no_warm_up)
        if args.profile:
            profile(work, args.profile)
        if args.make_run:
            make_run()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
