"""Run the test suite in two lanes, as ``make test`` and ``make test-fast`` do.

- the **spark** lane: every test that starts Spark, one at a time in one pytest process, so
  one Spark application runs at a time on the machine: the tests on the shared in-process
  session (marker ``spark_session``, set by ``tests/conftest.py``: ``local[2]``, and the
  ``local_cluster`` tests last on ``local-cluster[2,1,1024]``) and the tests marked ``spark``
  whose replicas run Spark in processes of their own; and the tests on a real API server
  (marker ``envtest``: one API server for the run);
- the **other** lane: everything else (pure units, manifests, the operator on the emulator
  with stand-in replicas, the console scripts that start no Spark) on four pytest-xdist
  workers, each given a test at a time (:data:`OTHER_WORKERS`).

The whole suite runs the lanes one after the other, the other lane first (its failures
show within minutes): on two cores the spark lane alone keeps both busy, and side by
side the two lanes took longer than one after the other (docs/architecture.md, "Tests").
``--fast`` runs them side by side, the other lane at a lower priority (:data:`NICENESS`):
its Spark tests are short, and the spark lane is what the run waits for. ``--beside CMD``
runs a command beside them at that priority too, as one more lane named ``beside``
(``make test-fast`` runs ``make lint`` so).

Each lane's lines are printed as they come, prefixed with the lane's name; at the end each
lane's slowest test modules (from its JUnit report: where the time goes) and its failed
tests are named again (a log's tail shows them), and the last line sums both lanes
(``tests: N passed, N failed, N skipped``). The exit status is the first
failing lane's, 0 when both pass (a lane that selects no test passes).

Usage: ``python tools/test_lanes.py [--fast] [--beside CMD] [--workers N] [PYTEST ARGS...]``;
``--fast``
leaves out the tests marked ``slow`` (the inner loop); ``DATAFLOW_TEST_WIDE=1`` runs the
fuzz and soak cases wide (more seeds and examples; see docs/architecture.md).
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
import threading
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from xml.etree import ElementTree

NO_TESTS_COLLECTED = 5
"""pytest's exit status when a selection matches no test."""

_COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)")
_SUMMARY = re.compile(r"^=* ?\d+ (passed|failed|skipped|deselected|errors?)\b.*\bin [\d.]+s\b.*$")
"""pytest's last line, between rules or (``-q``) bare."""
_FAILURE = re.compile(r"^(FAILED|ERROR) \S+")
"""pytest's short summary line of a failed test (``-r fE``, its default)."""
OTHER_WORKERS = ["--maxschedchunk", "1", "-n"]
"""The other lane's pytest-xdist options but the count: a test at a time to each worker
that is free. By default pytest-xdist gives each worker a run of neighbouring tests at
once, so one worker got a module's long operator tests one after another while the
others had finished (``tests/conftest.py`` puts the slow tests first). Four workers on two
cores: most of the lane's time is its operator tests waiting on their operators."""
NICENESS = "10"
"""How much lower a lane that yields (and the ``--beside`` command) runs side by side.
The fast tier's spark lane (one Spark session, its tests one at a time) is what the run
waits for; at equal priority the other lane's four workers and lint, started with it,
took the cores it needed to start Spark (docs/architecture.md, "Tests")."""
SLOWEST_MODULES = 5
"""Test modules named per lane at the end, the slowest first."""


@dataclass
class Lane:
    """One pytest process: its name, its marker expression and its extra options; or,
    with ``given``, a command of its own (``--beside``), which always yields."""

    name: str
    markers: str
    options: list[str]
    yields: bool = False
    """Side by side (``--fast``), it runs at a lower priority (``nice``), in the cores the
    other lane leaves: the run waits for the other lane, not for this one."""
    given: list[str] | None = None
    counts: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    status: int | None = None

    def command(self, fast: bool, extra: list[str], report: Path) -> list[str]:
        if self.given is not None:
            return ["nice", "-n", NICENESS, *self.given]
        markers = f"({self.markers}) and not slow" if fast else self.markers
        options = [*self.options, f"--junitxml={report}"]
        pytest = [sys.executable, "-m", "pytest", "-m", markers, *options, *extra]
        return ["nice", "-n", NICENESS, *pytest] if fast and self.yields else pytest


def module_seconds(report: Path) -> dict[str, float]:
    """Seconds per test module (``tests.runtime.test_x``) in a JUnit report; empty when
    there is none (a lane that failed to start)."""
    seconds: defaultdict[str, float] = defaultdict(float)
    try:
        cases = ElementTree.parse(report).iter("testcase")
        for case in cases:
            parts = (case.get("classname") or "").split(".")
            while len(parts) > 1 and not parts[-1].startswith("test"):
                parts.pop()  # a test class's name
            seconds[".".join(parts)] += float(case.get("time") or 0)
    except (OSError, ElementTree.ParseError):
        return {}
    return dict(seconds)


def slowest_line(lane: str, report: Path) -> str | None:
    """``lane NAME: slowest modules: a 120 s, b 80 s…``, or None without a report."""
    seconds = module_seconds(report)
    if not seconds:
        return None
    slowest = sorted(seconds.items(), key=lambda item: -item[1])[:SLOWEST_MODULES]
    named = ", ".join(f"{module} {total:.0f} s" for module, total in slowest)
    return f"lane {lane}: slowest modules: {named} (of {sum(seconds.values()):.0f} s)"


def _run(lane: Lane, fast: bool, extra: list[str], report: Path, lock: threading.Lock) -> None:
    """Run ``lane``, printing its lines with its name, and keep its summary's counts."""
    with subprocess.Popen(
        lane.command(fast, extra, report),
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
        "--workers", default="4", help="pytest-xdist workers of the other lane (default 4)"
    )
    parser.add_argument(
        "--beside",
        metavar="CMD",
        help="a command run beside the lanes at the lower priority, as a lane named "
        "'beside' (side by side with --fast, else first)",
    )
    args, extra = parser.parse_known_args(argv)
    lanes = [
        Lane(
            "other",
            "not (spark or spark_session or envtest)",
            [*OTHER_WORKERS, args.workers],
            yields=True,
        ),
        Lane("spark", "spark or spark_session or envtest", ["-n", "0"]),
    ]
    if args.beside:
        beside = shlex.split(args.beside)
        lanes.insert(0, Lane("beside", "", [], given=beside))
    lock = threading.Lock()
    with tempfile.TemporaryDirectory(prefix="test-lanes-") as reports:
        threads = [
            threading.Thread(
                target=_run, args=(lane, args.fast, extra, Path(reports, f"{lane.name}.xml"), lock)
            )
            for lane in lanes
        ]
        for thread in threads:
            thread.start()
            if not args.fast:
                thread.join()  # one lane at a time
        for thread in threads:
            thread.join()
        slowest = [slowest_line(lane.name, Path(reports, f"{lane.name}.xml")) for lane in lanes]
    total: Counter[str] = sum((lane.counts for lane in lanes), Counter())
    statuses = [lane.status for lane in lanes if lane.status not in (0, NO_TESTS_COLLECTED)]
    for line in slowest:
        if line is not None:
            print(line)
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
