"""The image starts an executor: Spark's container args ``[executor]`` after the image's
ENTRYPOINT exec the executor JVM with Spark's main class and arguments.

A fake ``java`` under ``JAVA_HOME`` records its argv and pid, so the test sees the
command the container would run and that it replaced the entry point's process.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from dataflow_operator.executor_command import EXECUTOR_BACKEND, executor_command, spark_home

ROOT = Path(__file__).resolve().parents[2]
FAKE_JAVA = """#!/bin/sh
echo $$ > "$DATAFLOW_TEST_RECORD.pid"
for arg in "$@"; do printf '%s\\0' "$arg"; done > "$DATAFLOW_TEST_RECORD"
"""
SPARK_ENV = {
    # what Spark's BasicExecutorFeatureStep sets on an executor container
    "SPARK_DRIVER_URL": "spark://CoarseGrainedScheduler@driver-1.r1-attempts.team.svc:7078",
    "SPARK_EXECUTOR_ID": "3",
    "SPARK_EXECUTOR_CORES": "2",
    "SPARK_EXECUTOR_MEMORY": "512m",
    "SPARK_APPLICATION_ID": "spark-application-1",
    "SPARK_EXECUTOR_POD_IP": "10.1.2.3",
    "SPARK_EXECUTOR_POD_NAME": "r1-exec-3",
    "SPARK_RESOURCE_PROFILE_ID": "0",
    "SPARK_CONF_DIR": "/opt/spark/conf",
    "SPARK_JAVA_OPT_0": "-Dspark.driver.port=7078",
    "SPARK_JAVA_OPT_1": "-Dspark.app.id=spark-application-1",
    "SPARK_JAVA_OPT_2": "-XX:+IgnoreUnrecognizedVMOptions",
    "SPARK_JAVA_OPT_10": "-Dspark.last=1",
}


def image_entrypoint() -> list[str]:
    """The Dockerfile's ENTRYPOINT without its init (tini), as a pod would run it."""
    line = next(
        line for line in (ROOT / "Dockerfile").read_text().splitlines()
        if line.startswith("ENTRYPOINT ")
    )  # fmt: skip
    entry: list[str] = json.loads(line.removeprefix("ENTRYPOINT "))
    return entry[entry.index("--") + 1 :] if "--" in entry else entry


def run_container(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run the image's entry point with Spark's executor args, as the kubelet would."""
    program, *rest = image_entrypoint()
    executable = str(Path(sys.executable).parent / program)
    base = {k: os.environ[k] for k in ("PATH", "PYTHONPATH") if k in os.environ}
    return subprocess.run(
        [executable, *rest, "executor"],
        env={**base, **env},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def java_home(tmp_path: Path) -> Path:
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text(FAKE_JAVA)
    java.chmod(0o755)
    return tmp_path / "jdk"


def test_spark_executor_args_exec_the_executor_backend_with_sparks_arguments(
    tmp_path: Path, java_home: Path
) -> None:
    record = tmp_path / "argv"
    env = {**SPARK_ENV, "JAVA_HOME": str(java_home), "DATAFLOW_TEST_RECORD": str(record)}
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / image_entrypoint()[0]), "executor"],
        env={**{k: os.environ[k] for k in ("PATH", "PYTHONPATH") if k in os.environ}, **env},
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
    )
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr
    argv = record.read_bytes().decode().split("\0")[:-1]
    jars = spark_home({}) / "jars" / "*"
    assert argv == [
        "-Dspark.driver.port=7078",
        "-Dspark.app.id=spark-application-1",
        "-XX:+IgnoreUnrecognizedVMOptions",
        "-Dspark.last=1",  # SPARK_JAVA_OPT_10 after _2: by number, as Spark numbers them
        "-Xms512m",
        "-Xmx512m",
        "-cp",
        f"/opt/spark/conf:{jars}:{tmp_path}",
        EXECUTOR_BACKEND,
        "--driver-url",
        "spark://CoarseGrainedScheduler@driver-1.r1-attempts.team.svc:7078",
        "--executor-id",
        "3",
        "--cores",
        "2",
        "--app-id",
        "spark-application-1",
        "--hostname",
        "10.1.2.3",
        "--resourceProfileId",
        "0",
        "--podName",
        "r1-exec-3",
    ]
    # exec, not a child: the JVM is the container's process and gets its signals
    assert int((tmp_path / "argv.pid").read_text()) == process.pid


def test_the_class_path_holds_the_executor_backend() -> None:
    jars = spark_home({}) / "jars"
    entry = EXECUTOR_BACKEND.replace(".", "/") + ".class"
    holding = [
        jar.name for jar in jars.glob("spark-kubernetes_*.jar") if entry in zipfile.ZipFile(jar).namelist()
    ]  # fmt: skip
    assert holding, f"no jar under {jars} holds {EXECUTOR_BACKEND}"


def test_class_path_follows_sparks_order() -> None:
    env = {
        **SPARK_ENV,
        "SPARK_HOME": "/opt/spark",
        "SPARK_CLASSPATH": "/extra/a.jar",
        "SPARK_EXTRA_CLASSPATH": "/extra/b.jar",
        "HADOOP_CONF_DIR": "/etc/hadoop",
        "SPARK_DIST_CLASSPATH": "/dist/*",
    }
    del env["SPARK_CONF_DIR"]
    command = executor_command(env, "/work")
    assert command[command.index("-cp") + 1] == (
        "/opt/spark/conf:/etc/hadoop:/extra/a.jar:/opt/spark/jars/*:/extra/b.jar:/work:/dist/*"
    )
    assert command[0] == "java" or command[0].endswith("/java")


def test_outside_an_executor_pod_it_says_which_variable_is_missing(
    tmp_path: Path, java_home: Path
) -> None:
    env = {k: v for k, v in SPARK_ENV.items() if k != "SPARK_DRIVER_URL"}
    result = run_container(tmp_path, {**env, "JAVA_HOME": str(java_home)})
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert "SPARK_DRIVER_URL is not set" in line


@pytest.mark.slow
def test_the_real_jvm_starts_the_executor_backend_and_dials_the_driver_url(
    tmp_path: Path,
) -> None:
    """With the machine's Java: the class path holds Spark, and the executor dials the
    driver URL it was given (here a closed port, so it exits with that error)."""
    java = shutil.which("java")
    if java is None:
        pytest.skip("no java on PATH")
    env = {
        **SPARK_ENV,
        "SPARK_DRIVER_URL": "spark://CoarseGrainedScheduler@127.0.0.1:1",
        "SPARK_EXECUTOR_POD_IP": "127.0.0.1",
        "SPARK_EXECUTOR_MEMORY": "256m",
        "SPARK_CONF_DIR": str(tmp_path),
        "JAVA_HOME": str(Path(java).resolve().parents[1]),
        "EXECUTOR_DRIVER_PROPS_FETCHER_MAX_ATTEMPTS": "1",  # Spark's retries: one try
    }
    result = run_container(tmp_path, env)
    assert result.returncode == 1, result.stderr[-2000:]
    assert "KubernetesExecutorBackend: Started daemon" in result.stderr
    assert "Failed to connect to /127.0.0.1:1" in result.stderr
