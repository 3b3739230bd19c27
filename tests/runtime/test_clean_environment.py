"""The console script outside ``make``: no PYSPARK_* variables, no venv on PATH.

Spark sessions are built in one place (``runtime/session.py``), which chooses the
workers' Python and keeps Spark's banner and the workers' chatter off stderr; these run
the installed ``dataflow-operator`` as a user would, from an empty directory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(sys.executable).with_name("dataflow-operator")
VENV_BIN = str(SCRIPT.parent)
NOISE = (
    "Using Spark's default log4j profile",
    "Setting default log level",
    "incubator modules",
    "NativeCodeLoader",
    "Python worker",
    "WARN ",
)

MANIFEST = """\
apiVersion: dataflow.dev/v1alpha1
kind: Dataflow
metadata: {name: agg}
spec:
  cluster: default
  kind: Subscribe
  sources:
    - name: more
      files: {path: more, format: json, schema: "content STRING, event_ts TIMESTAMP"}
  sql: SELECT content, count(*) AS n FROM more GROUP BY content
"""


def _clean_run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p != VENV_BIN)
    (tmp_path / "m.yaml").write_text(MANIFEST)
    return subprocess.run(
        [str(SCRIPT), *args],
        env={"PATH": path, "HOME": str(tmp_path)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


@pytest.mark.spark
@pytest.mark.slow
def test_explain_of_a_files_source_works_outside_make(tmp_path: Path) -> None:
    result = _clean_run(tmp_path, "explain", "m.yaml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("Dataflow/agg:\n")
    assert "TransformWithState" in result.stdout  # planned through the Python data source
    starting, up = result.stderr.splitlines()  # its start told, and nothing else
    assert starting == "starting Spark (local[1])…"
    assert up.startswith("Spark is up (local[1], ")


@pytest.mark.spark
@pytest.mark.slow
def test_run_prints_no_spark_or_worker_chatter(tmp_path: Path) -> None:
    """A query with state starts the workers that announce themselves on the JVM's stderr."""
    (tmp_path / "more").mkdir()
    (tmp_path / "more" / "a.json").write_text(
        json.dumps({"content": "a", "event_ts": "2026-01-01T00:00:00Z"}) + "\n"
    )
    result = _clean_run(
        tmp_path, "run", "m.yaml", "--clock", "simulated", "--tick", "1d",
        "--start-time", "2026-01-02T00:00:00Z", "--batches", "1", "--state-dir", "state",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\t")[1:] == ["1", "a", "1\n"]
    assert not [line for line in result.stderr.splitlines() if any(n in line for n in NOISE)]
    assert result.stderr.strip()  # its own progress still goes there


@pytest.mark.parametrize(
    ("line", "noise"),
    [
        ("WARNING: Using incubator modules: jdk.incubator.vector", True),
        ("Starting Streaming TransformWithStateInPandas Python worker.", True),
        (
            "Streaming TransformWithStateInPandas Python worker Completed execution of UDF: f.",
            True,
        ),
        ("26/01/01 00:00:00 ERROR Executor: Exception in task 0.0", False),
        ("", False),
    ],
)
def test_noise_lines(line: str, noise: bool) -> None:
    from dataflow_operator.runtime.jvm_output import is_noise

    assert is_noise(line) is noise


def test_forwarding_drops_noise_and_its_blank_line_only(tmp_path: Path) -> None:
    from dataflow_operator.runtime.jvm_output import forward_stderr

    source = tmp_path / "jvm.err"
    source.write_bytes(
        b"WARNING: Using incubator modules: jdk.incubator.vector\n"
        b"Starting Streaming TransformWithStateInPandas Python worker.\n\n"
        b"ERROR boom\n\nat line\n"
    )
    target = tmp_path / "out"
    with source.open("rb") as stream, target.open("wb") as out:
        forward_stderr(stream, out.fileno())
    assert target.read_bytes() == b"ERROR boom\n\nat line\n"


def test_a_given_log4j2_configuration_wins() -> None:
    from dataflow_operator.runtime.session import LOG4J2_CONFIG, driver_java_options

    assert driver_java_options(None) == f"-Dlog4j2.configurationFile={LOG4J2_CONFIG.as_uri()}"
    assert driver_java_options("-Xss4m").startswith("-Xss4m -Dlog4j2.configurationFile=file:")
    mine = "-Dlog4j2.configurationFile=/etc/mine.properties"
    assert driver_java_options(mine) == mine
    assert LOG4J2_CONFIG.is_file()
