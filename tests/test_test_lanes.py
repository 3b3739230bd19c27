"""tools/test_lanes.py: both lanes run, and a failure is named again at the very end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).parents[1] / "tools" / "test_lanes.py"


def test_failed_tests_are_named_again_below_the_totals_of_both_lanes(tmp_path: Path) -> None:
    (tmp_path / "test_sample.py").write_text(
        "import pytest\n"
        "def test_passes():\n    assert True\n"
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
    tail = run.stdout.splitlines()[-5:]
    assert run.returncode == 1, run.stdout + run.stderr
    assert tail[-1] == "tests: 1 passed, 2 failed, 0 skipped", run.stdout
    assert "lane spark: FAILED test_sample.py::test_in_the_spark_lane_fails" in tail[:-1], tail
    assert "lane other: FAILED test_sample.py::test_fails" in tail[:-1], tail
