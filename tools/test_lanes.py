"""Run the test suite in two lanes side by side, as ``make test`` and ``make test-fast`` do.

- the **spark** lane: every test that starts Spark, one at a time in one pytest process, so
  one Spark application runs at a time on the machine: the tests on the shared in-process
  session (marker ``spark_session``, set by ``tests/conftest.py``: ``local[2]``, and the
  ``local_cluster`` tests last on ``local-cluster[2,1,1024]``) and the tests marked ``spark``
  whose replicas run Spark in processes of their own; and the tests on a real API server
  (marker ``envtest``: one API server for the run);
- the **other** lane: everything else (pure units, manifests, the operator on the emulator
  with stand-in replicas, the console scripts that start no Spark) on pytest-xdist workers.

Each lane's lines are printed as they come, prefixed with the lane's name; at the end each
lane's failed tests are named again (a log's tail shows them), and the last line sums
both lanes (``tests: N passed, N failed, N skipped``). The exit status is the first
failing lane's, 0 when both pass (a lane that selects no test passes).

Usage: ``python tools/test_lanes.py [--fast] [--workers N] [PYTEST ARGS...]``; ``--fast``
leaves out the tests marked ``slow`` (the inner loop); ``DATAFLOW_TEST_WIDE=1`` runs the
fuzz and soak cases wide (more seeds and examples; see docs/architecture.md).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import threading
from collections import Counter
from dataclasses import dataclass, field

NO_TESTS_COLLECTED = 5
"""pytest's exit status when a selection matches no test."""

_COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)")
_SUMMARY = re.compile(r"^=* ?\d+ (passed|failed|skipped|deselected|errors?)\b.*\bin [\d.]+s\b.*$")
"""pytest's last line, between rules or (``-q``) bare."""
_FAILURE = re.compile(r"^(FAILED|ERROR) \S+")
"""pytest's short summary line of a failed test (``-r fE``, its default)."""


@dataclass
class Lane:
    """One pytest process: its name, its marker expression and its extra options."""

    name: str
    markers: str
    options: list[str]
    counts: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    status: int | None = None

    def command(self, fast: bool, extra: list[str]) -> list[str]:
        markers = f"({self.markers}) and not slow" if fast else self.markers
        return [sys.executable, "-m", "pytest", "-m", markers, *self.options, *extra]


def _run(lane: Lane, fast: bool, extra: list[str], lock: threading.Lock) -> None:
    """Run ``lane``, printing its lines with its name, and keep its summary's counts."""
    with subprocess.Popen(
        lane.command(fast, extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        errors="replace",
        bufsize=1,
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            if _SUMMARY.match(line.strip()):
                lane.counts = Counter(
                    {
                        kind.rstrip("s") if kind.startswith("error") else kind: int(n)
                        for n, kind in _COUNT.findall(line)
                    }
                )
            elif failure := _FAILURE.match(line):
                lane.failures.append(failure.group(0))
            with lock:
                sys.stdout.write(f"[{lane.name}] {line}")
                sys.stdout.flush()
    lane.status = process.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fast", action="store_true", help="leave out the slow tests")
    parser.add_argument(
        "--workers", default="2", help="pytest-xdist workers of the other lane (default 2)"
    )
    args, extra = parser.parse_known_args(argv)
    lanes = [
        Lane("spark", "spark or spark_session or envtest", ["-n", "0"]),
        Lane("other", "not (spark or spark_session or envtest)", ["-n", args.workers]),
    ]
    lock = threading.Lock()
    threads = [threading.Thread(target=_run, args=(lane, args.fast, extra, lock)) for lane in lanes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    total: Counter[str] = sum((lane.counts for lane in lanes), Counter())
    statuses = [lane.status for lane in lanes if lane.status not in (0, NO_TESTS_COLLECTED)]
    for lane in lanes:
        print(f"lane {lane.name}: exit {lane.status}, {dict(lane.counts) or 'no summary'}")
        for failure in lane.failures:  # again at the end, where a log's tail shows them
            print(f"lane {lane.name}: {failure}")
    print(
        f"tests: {total['passed']} passed, {total['failed'] + total['error']} failed, "
        f"{total['skipped']} skipped"
    )
    if statuses:
        return statuses[0] or 1
    return 0


if __name__ == "__main__":
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    sys.exit(main())
