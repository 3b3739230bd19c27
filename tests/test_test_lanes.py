"""tools/test_lanes.py: both lanes run, and a failure and the slowest modules are named
again at the very end."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

TOOL = Path(__file__).parents[1] / "tools" / "test_lanes.py"


def _run_lanes(folder: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """The tool over the tests in ``folder``, one worker in the other lane."""
    pytest_options = [
        "-p",
        "no:cacheprovider",
        "-q",
        "-W",
        "ignore::pytest.PytestUnknownMarkWarning",
    ]
    return subprocess.run(
        [sys.executable, str(TOOL), *options, "--workers", "1", *pytest_options, str(folder)],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.slow
def test_failed_tests_are_named_again_below_the_totals_of_both_lanes(tmp_path: Path) -> None:
    (tmp_path / "test_sample.py").write_text(
        "import pytest\n"
        "import time\n"
        "def test_passes():\n    time.sleep(1.0)\n"
        "def test_fails():\n    assert 1 == 2\n"
        "@pytest.mark.spark\ndef test_in_the_spark_lane_fails():\n    assert False\n"
    )
    run = _run_lanes(tmp_path)
    tail = run.stdout.splitlines()[-7:]
    assert run.returncode == 1, run.stdout + run.stderr
    assert tail[-1] == "tests: 1 passed, 2 failed, 0 skipped", run.stdout
    assert "lane spark: FAILED test_sample.py::test_in_the_spark_lane_fails" in tail[:-1], tail
    assert "lane other: FAILED test_sample.py::test_fails" in tail[:-1], tail
    assert "lane spark: slowest modules: test_sample 0 s (of 0 s)" in tail, tail
    other = next(line for line in tail if line.startswith("lane other: slowest modules: "))
    seconds = re.fullmatch(r"lane other: slowest modules: test_sample (\d+) s \(of \1 s\)", other)
    assert seconds is not None and int(seconds.group(1)) >= 1, other  # the 1 s sleep


def _recording_tests(folder: Path) -> Path:
    """A test in each lane (the other lane's sleeps 1 s) that records its lane, when it
    began and ended and its niceness; the file they record in."""
    record = folder / "record"
    (folder / "test_recorded.py").write_text(
        "import os, pytest, time\n"
        "def _record(lane, seconds):\n"
        "    began = time.time(); time.sleep(seconds)\n"
        f"    with open({str(record)!r}, 'a') as out:\n"
        "        out.write(f'{lane} {began} {time.time()} {os.nice(0)}\\n')\n"
        "def test_other():\n    _record('other', 1.0)\n"
        "@pytest.mark.spark\ndef test_spark():\n    _record('spark', 0.1)\n"
    )
    return record


def _recorded(record: Path) -> dict[str, list[str]]:
    """Each lane's test's record: began, ended, niceness."""
    return {lane: rest for lane, *rest in map(str.split, record.read_text().splitlines())}


@pytest.mark.slow
def test_the_whole_suite_runs_the_other_lane_then_the_spark_lane(tmp_path: Path) -> None:
    record = _recording_tests(tmp_path)
    run = _run_lanes(tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    recorded = _recorded(record)
    assert float(recorded["spark"][0]) >= float(recorded["other"][1]), recorded  # one at a time


def _beside(record: Path, status: int = 0) -> str:
    """A ``--beside`` command that records itself as the lanes' tests do, then exits
    with ``status``."""
    code = (
        f"import os, sys, time; open({str(record)!r}, 'a').write("
        f"f'beside {{time.time()}} {{time.time()}} {{os.nice(0)}}\\n'); sys.exit({status})"
    )
    return f"{sys.executable} -c {shlex.quote(code)}"


@pytest.mark.slow
def test_side_by_side_the_other_lane_runs_at_a_lower_priority(tmp_path: Path) -> None:
    record = _recording_tests(tmp_path)
    run = _run_lanes(tmp_path, "--fast", "--beside", _beside(record))
    assert run.returncode == 0, run.stdout + run.stderr
    recorded = _recorded(record)
    base = os.nice(0)
    niceness = {lane: int(values[2]) for lane, values in recorded.items()}
    assert niceness == {"beside": base + 10, "other": base + 10, "spark": base}, recorded


@pytest.mark.slow
def test_a_failing_beside_command_fails_the_run(tmp_path: Path) -> None:
    record = _recording_tests(tmp_path)
    run = _run_lanes(tmp_path, "--fast", "--beside", _beside(record, status=3))
    assert run.returncode == 3, run.stdout + run.stderr
    assert "lane beside: exit 3, no summary" in run.stdout.splitlines(), run.stdout
    assert "tests: 2 passed, 0 failed, 0 skipped" in run.stdout.splitlines(), run.stdout
