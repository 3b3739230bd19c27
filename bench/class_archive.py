"""What the driver's class archive saves: Spark's start, and a whole `run`, with and without.

Usage: ``python bench/class_archive.py [--rounds N] [--archive PATH]``

Each round, alternating without and with the archive (``DATAFLOW_CLASS_ARCHIVE=off`` or
the archive's path; default: where drivers look for it, written first if missing):

- ``session``: a fresh process starts a Spark session (``local[2]``) and runs one
  aggregate query: the seconds to the session, then to the query's answer;
- ``run``: ``dataflow-operator run`` of a one-row temporal-filter dataflow over a table,
  one simulated day, from the console script in a clean environment: its wall time
  (the driver's start, the replica's warm-up, one batch).

Prints one line per measurement and the medians.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dataflow_operator.runtime.class_archive import ARCHIVE_ENV, archive_path

SCRIPT = Path(sys.executable).with_name("dataflow-operator")
SESSION = """
import time
began = time.monotonic()
from dataflow_operator.runtime.session import spark_session
spark = spark_session("local[2]", "bench-class-archive")
up = time.monotonic()
spark.range(100000).selectExpr("id % 7 AS k").groupBy("k").count().collect()
print(f"{up - began:.2f} {time.monotonic() - up:.2f}")
"""
MANIFEST = """\
apiVersion: dataflow.dev/v1alpha1
kind: Dataflow
metadata: {name: recent}
spec:
  cluster: bench
  kind: Subscribe
  sources: [{name: events, table: {path: events, schema: "id INT, ts TIMESTAMP"}}]
  sql: SELECT id, ts FROM events WHERE mz_now() <= ts + INTERVAL '30 days'
"""


def _session(env: dict[str, str]) -> tuple[float, float]:
    out = subprocess.run(
        [sys.executable, "-c", SESSION], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    return float(out[-2]), float(out[-1])


def _run(env: dict[str, str]) -> float:
    with tempfile.TemporaryDirectory(prefix="bench-class-archive-") as folder:
        Path(folder, "m.yaml").write_text(MANIFEST)
        row = '{"id": 1, "ts": "2026-01-01T00:00:00Z"}'
        insert = [str(SCRIPT), "insert", "events", row]
        subprocess.run(insert, env=env, cwd=folder, capture_output=True, check=True)
        began = time.monotonic()
        run = ["run", "m.yaml", "--clock", "simulated", "--tick", "1d", "--batches", "1"]
        subprocess.run(
            [str(SCRIPT), *run, "--start-time", "2026-01-01T00:00:00Z"],
            env=env,
            cwd=folder,
            capture_output=True,
            check=True,
        )
        return time.monotonic() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--archive", type=Path, default=None)
    args = parser.parse_args()
    archive = args.archive or archive_path()
    if archive is None:
        sys.exit(f"{ARCHIVE_ENV} is off: give --archive PATH")
    if not archive.is_file():
        subprocess.run([str(SCRIPT), "class-archive", "--output", str(archive)], check=True)
    clean = {"HOME": os.environ.get("HOME", "/"), "PATH": "/usr/bin:/bin"}
    figures: dict[str, list[float]] = {}
    for round_ in range(1, args.rounds + 1):
        for label, value in (("without", "off"), ("with", str(archive))):
            env = {**clean, ARCHIVE_ENV: value}
            start, query = _session({**os.environ, ARCHIVE_ENV: value})
            ran = _run(env)
            for name, seconds in (("session", start), ("first query", query), ("run", ran)):
                figures.setdefault(f"{name} {label}", []).append(seconds)
            load = os.getloadavg()[0]
            print(
                f"round {round_} {label:7}: session {start:.2f} s, first query {query:.2f} s, "
                f"run {ran:.2f} s (load {load:.1f})",
                flush=True,
            )
    for name, values in figures.items():
        print(f"median {name}: {statistics.median(values):.2f} s")


if __name__ == "__main__":
    main()
