"""``dataflow-operator replica``: injected configuration, serving, graceful stop, expiry."""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from pyspark.sql import SparkSession
from tests.jvm import TEST_SPARK_CONF

from dataflow_operator.api import injection
from dataflow_operator.api.protocol import ReplicaPhase, ReplicaReport
from dataflow_operator.runtime.cli.replica import (
    ConfigError,
    ReplicaConfig,
    configure,
    execute,
)
from dataflow_operator.runtime.serve import ControlServer


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    configure(parser)
    return parser.parse_args(list(argv))


def _get(port: int, path: str, method: str = "GET", body: Any = None) -> tuple[int, Any]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request(method, path, body=None if body is None else json.dumps(body))
        response = connection.getresponse()
        text = response.read().decode()
        kind = response.getheader("Content-Type", "")
        return response.status, json.loads(text) if "json" in kind else text
    finally:
        connection.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_configuration_from_the_injected_environment() -> None:
    env = {
        injection.ENV_START_TIME_MS: "1700000000000",
        injection.ENV_START_TIME: "2023-11-14T22:13:20.000Z",
        injection.ENV_EXPIRATION_OFFSET: "21d",
        injection.ENV_REPLICA: "r1",
        injection.ENV_NAMESPACE: "ns",
        injection.ENV_CLUSTER: "default",
        injection.ENV_ATTEMPT: "3",
        injection.ENV_CONTROL_ADDRESS: "0.0.0.0:9999",
        injection.ENV_STATE_URI: "s3a://bucket/replicas/r1",
        "AWS_ENDPOINT_URL": "http://minio:9000",
        injection.ENV_SPARK_MASTER: "k8s://https://kubernetes.default.svc",
        injection.ENV_SPARK_CONF: json.dumps({"spark.executor.instances": "2"}),
        injection.ENV_EXECUTOR_POD_TEMPLATE: json.dumps(
            {"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [{"name": "executor"}]}}
        ),
    }
    config = ReplicaConfig.resolve(_args(), env)
    assert config.start_time == 1_700_000_000_000
    assert config.expiration_offset is not None and str(config.expiration_offset) == "21d"
    assert config.master == "k8s://https://kubernetes.default.svc"
    assert config.control_address == "0.0.0.0:9999"
    assert config.state_dir == "s3a://bucket/replicas/r1"
    assert config.spark_conf["spark.hadoop.fs.s3a.endpoint"] == "http://minio:9000"
    assert config.spark_conf["spark.executor.instances"] == "2"
    template = Path(config.spark_conf["spark.kubernetes.executor.podTemplateFile"])
    assert json.loads(template.read_text())["spec"]["containers"] == [{"name": "executor"}]
    assert config.spark_conf[injection.CONF_START_TIME_MS] == "1700000000000"
    assert config.labels == {"replica": "r1", "namespace": "ns", "cluster": "default"}
    # flags win over the environment
    flagged = ReplicaConfig.resolve(
        _args("--master", "local[2]", "--expiration-offset", "0", "--conf", "a.b=c"), env
    )
    assert flagged.master == "local[2]" and flagged.expiration_offset is None
    assert flagged.spark_conf["a.b"] == "c"


def test_the_older_state_dir_variable_and_a_bad_pod_template() -> None:
    env = {injection.ENV_STATE_DIR: "/data/state"}
    assert ReplicaConfig.resolve(_args(), env).state_dir == "/data/state"
    local = {**env, injection.ENV_EXECUTOR_POD_TEMPLATE: "{}"}
    assert "spark.kubernetes.executor.podTemplateFile" not in (
        ReplicaConfig.resolve(_args(), local).spark_conf  # no executors without k8s://
    )
    broken = {**local, injection.ENV_SPARK_MASTER: "k8s://https://k", "x": ""}
    broken[injection.ENV_EXECUTOR_POD_TEMPLATE] = "{not json"
    with pytest.raises(ConfigError, match="DATAFLOW_EXECUTOR_POD_TEMPLATE: not JSON"):
        ReplicaConfig.resolve(_args(), broken)
    with pytest.raises(ConfigError, match="unsupported scheme 'ftp'"):
        ReplicaConfig.resolve(_args(), {injection.ENV_STATE_URI: "ftp://x/y"})


def test_defaults_and_conf_twins() -> None:
    conf = {injection.CONF_START_TIME_MS: "42", injection.CONF_EXPIRATION_OFFSET: "1h"}
    config = ReplicaConfig.resolve(
        _args(), {injection.ENV_SPARK_CONF: json.dumps(conf)}, now=lambda: 7
    )
    assert config.start_time == 42 and config.expiration_offset is not None
    assert config.expiration_offset.millis == 3_600_000
    assert config.master == "local[*]"
    bare = ReplicaConfig.resolve(_args(), {}, now=lambda: 7)
    assert bare.start_time == 7 and bare.expiration_offset is None
    assert bare.control_address == ""  # → 0.0.0.0:8765


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({injection.ENV_EXPIRATION_OFFSET: "soon"}, "expiration offset"),
        ({injection.ENV_START_TIME_MS: "yesterday"}, injection.ENV_START_TIME_MS),
        ({injection.ENV_SPARK_CONF: "[1]"}, "JSON object"),
        ({injection.ENV_CONTROL_ADDRESS: "host:port"}, "not a port"),
        ({injection.ENV_CONTROL_TOKEN_FILE: "/nonexistent/token"}, "No such file"),
    ],
)
def test_bad_configuration_is_one_clear_error(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ReplicaConfig.resolve(_args(), env)


def test_the_control_token_is_read_from_the_injected_file(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("abc123\n")
    env = {injection.ENV_CONTROL_TOKEN_FILE: str(tmp_path / "token")}
    config = ReplicaConfig.resolve(_args(), env)
    assert config.control_token == "abc123"
    assert "abc123" not in repr(config)
    assert ReplicaConfig.resolve(_args(), {}).control_token is None


@pytest.mark.spark
@pytest.mark.slow
def test_serves_until_stopped(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    start = int(time.time() * 1000)
    config = ReplicaConfig.resolve(
        _args(
            "--control-address",
            "127.0.0.1:0",
            "--state-dir",
            str(tmp_path),
            "--start-time",
            str(start),
            "--expiration-offset",
            "1h",
            "--tick",
            "200ms",
            "--replica",
            "r1",
            "--conf",
            "spark.sql.shuffle.partitions=3",  # the user's choice of state partitions
        ),
        {},
    )
    stop = threading.Event()
    serving: list[ControlServer] = []
    codes: list[int] = []
    worker = threading.Thread(
        target=lambda: codes.append(execute(config, spark, stop, serving.append)), daemon=True
    )
    worker.start()
    deadline = time.monotonic() + 60
    while not serving and time.monotonic() < deadline:
        time.sleep(0.05)
    port = serving[0].port
    assert _get(port, "/healthz")[0] == 200
    # Spark is up: ready and Running before any desired set (docs/operations.md), as
    # the log line says (below); the operator waits for its set's dataflows itself.
    assert _get(port, "/readyz")[0] == 200
    assert ReplicaReport.model_validate(_get(port, "/status")[1]).phase is ReplicaPhase.RUNNING
    assert _get(port, "/dataflows", "PUT", {"version": "v1", "dataflows": []})[0] == 200
    assert _get(port, "/readyz")[0] == 200
    report = ReplicaReport.model_validate(_get(port, "/status")[1])
    assert report.start_time == start and report.expiration == start + 3_600_000
    assert report.phase is ReplicaPhase.RUNNING
    phases = {
        (sample.labels["replica"], sample.labels["phase"]): sample.value
        for family in text_string_to_metric_families(_get(port, "/metrics")[1])
        if family.name == "dataflow_replica_phase"
        for sample in family.samples
    }
    assert phases[("r1", "Running")] == 1 and phases[("r1", "Starting")] == 0
    stop.set()
    worker.join(timeout=60)
    assert codes == [injection.EXIT_OK]
    with pytest.raises(OSError):
        _get(port, "/healthz")
    logged = capsys.readouterr()
    assert re.search(r"replica ready.*state_partitions\W+3\b", logged.out + logged.err)


@pytest.mark.spark
@pytest.mark.slow
def test_expires_with_the_expired_exit_code(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    now = int(time.time() * 1000)
    config = ReplicaConfig.resolve(
        _args(
            "--control-address",
            "127.0.0.1:0",
            "--state-dir",
            str(tmp_path),
            "--start-time",
            str(now - 59_000),
            "--expiration-offset",
            "1m",
            "--tick",
            "200ms",
        ),
        {},
    )
    started = time.monotonic()
    code = execute(config, spark, threading.Event())
    assert code == injection.EXIT_EXPIRED
    assert time.monotonic() - started < 30
    err = capsys.readouterr().err
    assert "replica expired. now: " in err and f"expiration: {now + 1000} (" in err


@pytest.mark.spark
@pytest.mark.slow
def test_the_entry_point_stops_gracefully_on_sigterm(tmp_path: Path) -> None:
    port = _free_port()
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        injection.ENV_START_TIME_MS: str(int(time.time() * 1000)),
        injection.ENV_EXPIRATION_OFFSET: "1d",
        injection.ENV_REPLICA: "r9",
        injection.ENV_CONTROL_ADDRESS: f"127.0.0.1:{port}",
        injection.ENV_STATE_DIR: str(tmp_path / "state"),
        injection.ENV_SPARK_MASTER: "local[1]",
        injection.ENV_SPARK_CONF: json.dumps(
            {"spark.sql.shuffle.partitions": "2", **TEST_SPARK_CONF}
        ),
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "dataflow_operator", "replica"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if _get(port, "/healthz")[0] == 200:
                    break
            except OSError:
                time.sleep(0.2)
        report = ReplicaReport.model_validate(_get(port, "/status")[1])
        assert report.start_time == int(env[injection.ENV_START_TIME_MS])
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == injection.EXIT_OK, err
    assert "Traceback" not in err


@pytest.mark.spark
@pytest.mark.slow
def test_the_control_api_answers_before_spark_is_up(tmp_path: Path) -> None:
    port = _free_port()
    start = int(time.time() * 1000)
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        injection.ENV_START_TIME_MS: str(start),
        injection.ENV_CONTROL_ADDRESS: f"127.0.0.1:{port}",
        injection.ENV_STATE_DIR: str(tmp_path / "state"),
        injection.ENV_SPARK_MASTER: "local[1]",
        injection.ENV_SPARK_CONF: json.dumps(TEST_SPARK_CONF),
    }
    began = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "dataflow_operator", "replica", "--tick", "200ms"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    empty = {"version": "v1", "dataflows": []}
    try:
        deadline = began + 120
        healthy = ready = None
        early: list[tuple[int, Any]] = []
        while ready is None and time.monotonic() < deadline:
            try:
                if healthy is None and _get(port, "/healthz")[0] == 200:
                    healthy = time.monotonic() - began
                    early = [_get(port, "/status"), _get(port, "/readyz")]
                    early.append(_get(port, "/dataflows", "PUT", empty))
                if _get(port, "/dataflows", "PUT", empty)[0] == 200:
                    assert _get(port, "/readyz")[0] == 200
                    ready = time.monotonic() - began
            except OSError:
                pass
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert healthy is not None and ready is not None, err
    # liveness answers in the time Python takes to start, far below Spark's start
    assert healthy < 10 and healthy < ready
    (status, report), readyz, put = early
    assert status == 200
    assert ReplicaReport.model_validate(report) == ReplicaReport(
        start_time=start, phase=ReplicaPhase.STARTING
    )
    assert readyz[0] == 503
    assert put[0] == 503 and put[1]["error"] == "NotReady"
    assert "starting" in put[1]["message"]
    assert process.returncode == injection.EXIT_OK, err
