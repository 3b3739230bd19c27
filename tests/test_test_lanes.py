"""tools/test_lanes.py: both lanes run, and a failure and the slowest modules are named
again at the very end."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

TOOL = Path(__file__).parents[1] / "tools" / "test_lanes.py"


@pytest.mark.slow
def test_failed_tests_are_named_again_below_the_totals_of_both_lanes(tmp_path: Path) -> None:
    (tmp_path / "test_sample.py").write_text(
        "import pytest\n"
        "import time\n"
        "def test_passes():\n    time.sleep(1.0)\n"
        "def test_fails():\n    assert 1 == 2\n"
        "@pytest.mark.spark\ndef test_in_the_spark_lane_fails():\n    assert False\n"
    )
    run = subprocess.run(
        [
            sys.executable,
            str(TOOL),
            "--workers",
            "1",
            "-p",
            "no:cacheprovider",
            "-q",
            "-W",
            "ignore::pytest.PytestUnknownMarkWarning",
            str(tmp_path),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    tail = run.stdout.splitlines()[-7:]
    assert run.returncode == 1, run.stdout + run.stderr
    assert tail[-1] == "tests: 1 passed, 2 failed, 0 skipped", run.stdout
    assert "lane spark: FAILED test_sample.py::test_in_the_spark_lane_fails" in tail[:-1], tail
    assert "lane other: FAILED test_sample.py::test_fails" in tail[:-1], tail
    assert "lane spark: slowest modules: test_sample 0 s (of 0 s)" in tail, tail
    other = next(line for line in tail if line.startswith("lane other: slowest modules: "))
    seconds = re.fullmatch(r"lane other: slowest modules: test_sample (\d+) s \(of \1 s\)", other)
    assert seconds is not None and int(seconds.group(1)) >= 1, other  # the 1 s sleep


@pytest.mark.slow
def test_the_whole_suite_runs_the_other_lane_then_the_spark_lane(tmp_path: Path) -> None:
    times = tmp_path / "times"
    (tmp_path / "test_order.py").write_text(
        "import pytest, time\n"
        "def _record(name, seconds):\n"
        "    began = time.time(); time.sleep(seconds)\n"
        f"    with open({str(times)!r}, 'a') as out:\n"
        "        out.write(f'{name} {began} {time.time()}\\n')\n"
        "def test_other():\n    _record('other', 1.0)\n"
        "@pytest.mark.spark\ndef test_spark():\n    _record('spark', 0.1)\n"
    )
    lanes = [sys.executable, str(TOOL), "--workers", "1", "-p", "no:cacheprovider", "-q"]
    warnings = ["-W", "ignore::pytest.PytestUnknownMarkWarning"]
    run = subprocess.run(
        [*lanes, *warnings, str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    spans = {
        name: (float(a), float(b)) for name, a, b in map(str.split, times.read_text().splitlines())
    }
    assert spans["spark"][0] >= spans["other"][1], spans  # not side by side


@pytest.mark.slow
def test_side_by_side_the_other_lane_runs_at_a_lower_priority(tmp_path: Path) -> None:
    niceness = tmp_path / "niceness"
    (tmp_path / "test_priority.py").write_text(
        "import os, pytest\n"
        "def _record(lane):\n"
        f"    with open({str(niceness)!r}, 'a') as out:\n"
        "        out.write(f'{lane} {os.nice(0)}\\n')\n"
        "def test_other():\n    _record('other')\n"
        "@pytest.mark.spark\ndef test_spark():\n    _record('spark')\n"
    )
    lanes = [sys.executable, str(TOOL), "--fast", "--workers", "1", "-p", "no:cacheprovider"]
    warnings = ["-W", "ignore::pytest.PytestUnknownMarkWarning"]
    run = subprocess.run(
        [*lanes, "-q", *warnings, str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    base = os.nice(0)
    recorded = dict(map(str.split, niceness.read_text().splitlines()))
    assert recorded == {"other": str(base + 10), "spark": str(base)}, recorded
