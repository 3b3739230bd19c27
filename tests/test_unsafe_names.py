"""No user-given name may escape its directory: every entry point refuses one that could.

A name becomes a path (``<state>/dataflows/<name>``, ``…/sources/<source>``,
``/tmp/dataflow-replica/<replica>``, ``attempts/N``), so each entry point — the control
API, the command line, the operator's models — refuses it with one line naming the field,
and the layout refuses it once more where the path is joined.
"""

from __future__ import annotations

import argparse
import http.client
import io
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from dataflow_operator.api.dataflow import Dataflow
from dataflow_operator.api.injection import EXIT_USAGE
from dataflow_operator.api.protocol import DesiredDataflow, ErrorBody, SourceRelease
from dataflow_operator.api.replica import ReplicaStatus
from dataflow_operator.cli import main
from dataflow_operator.runtime.cli import replica as replica_command
from dataflow_operator.runtime.cli import run as run_command
from dataflow_operator.runtime.engine.layout import DataflowLayout
from dataflow_operator.runtime.serve import ControlServer
from dataflow_operator.runtime.storage import Location, UnsafePath
from tests.runtime.fake_replica import FakeReplica

UNSAFE = {
    "dot-dot": "..",
    "dot-dot slash": "../x",
    "absolute": "/abs",
    "slash": "a/b",
    "empty": "",
    "nul": "a\x00b",
    "300 characters": "a" * 300,
}
SPEC = {
    "cluster": "c",
    "kind": "Index",
    "sources": [{"name": "e", "table": {"path": "data/e", "schema": "x INT"}}],
    "sql": "SELECT x FROM e",
}
"""A valid spec: only the names around it are unsafe."""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[ControlServer, FakeReplica]]:
    replica = FakeReplica(tmp_path)
    with ControlServer(replica, "127.0.0.1:0", clock=lambda: 2000) as running:
        yield running, replica


def _put(server: ControlServer, path: str, body: Any) -> tuple[int, ErrorBody]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        data = json.dumps(body).encode()
        connection.request("PUT", path, body=data, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, ErrorBody.model_validate_json(response.read())
    finally:
        connection.close()


@pytest.mark.parametrize("name", list(UNSAFE.values()), ids=list(UNSAFE))
def test_the_control_api_refuses_a_dataflow_name_with_one_line(
    server: tuple[ControlServer, FakeReplica], name: str
) -> None:
    running, replica = server
    body = {
        "version": "v1",
        "dataflows": [{"name": "ok", "spec": SPEC}, {"name": name, "spec": SPEC}],
    }
    status, error = _put(running, "/dataflows", body)
    assert (status, error.error) == (400, "InvalidBody")
    assert error.message.startswith("dataflows[1].name: ")
    assert "\n" not in error.message
    assert not replica.installed  # nothing of the set was applied


@pytest.mark.parametrize("name", list(UNSAFE.values()), ids=list(UNSAFE))
def test_the_control_api_refuses_release_names(
    server: tuple[ControlServer, FakeReplica], name: str
) -> None:
    running, _ = server
    for field, entry in (
        ("dataflow", {"dataflow": name, "source": "s", "listed": 1}),
        ("source", {"dataflow": "d", "source": name, "listed": 1}),
    ):
        status, error = _put(running, "/release", {"version": "v1", "sources": [entry]})
        assert status == 400, field
        assert error.message.startswith(f"sources[0].{field}: "), error.message


def _manifest(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "dataflow.dev/v1alpha1",
        "kind": "Dataflow",
        "metadata": {"name": name},
        "spec": SPEC,
    }


def _no_spark() -> Any:
    raise AssertionError("Spark started for input that was refused")


@pytest.mark.parametrize("name", list(UNSAFE.values()), ids=list(UNSAFE))
@pytest.mark.parametrize("command", ["check", "run"])
def test_check_and_run_refuse_it_naming_the_field(
    command: str, name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "flows.yaml"
    path.write_text(yaml.safe_dump_all([_manifest(name)]))
    state = tmp_path / "state"
    if command == "check":
        assert main(["check", str(path)]) == 1
        printed = capsys.readouterr().out
    else:
        parser = argparse.ArgumentParser()
        run_command.configure(parser)
        args = parser.parse_args([str(path), "--state-dir", str(state)])
        out, err = io.StringIO(), io.StringIO()
        assert run_command.execute(args, _no_spark, out, err) == EXIT_USAGE
        printed = err.getvalue()
    lines = [line for line in printed.splitlines() if "metadata.name" in line]
    assert lines and lines[0].startswith(f"{path}: Dataflow/"), printed
    assert not state.exists()


@pytest.mark.parametrize("name", list(UNSAFE.values()), ids=list(UNSAFE))
@pytest.mark.parametrize("variable", ["replica", "attempt", "keep"])
def test_the_replica_command_refuses_names_that_become_paths(variable: str, name: str) -> None:
    parser = argparse.ArgumentParser()
    replica_command.configure(parser)
    env = {
        "replica": {"DATAFLOW_REPLICA": name},
        "attempt": {"DATAFLOW_ATTEMPT": name},
        "keep": {"DATAFLOW_STATE_KEEP": name},
    }[variable]
    if name == "" and variable != "keep":
        pytest.skip("an empty variable is an unset one (the default applies)")
    if name == "" and variable == "keep":
        pytest.skip("an empty DATAFLOW_STATE_KEEP is the location's root state")
    with pytest.raises(replica_command.ConfigError) as raised:
        replica_command.ReplicaConfig.resolve(parser.parse_args([]), env)
    assert next(iter(env)) in str(raised.value) and "\n" not in str(raised.value)


def test_the_replica_flag_is_checked_too() -> None:
    parser = argparse.ArgumentParser()
    replica_command.configure(parser)
    with pytest.raises(replica_command.ConfigError, match="--replica"):
        replica_command.ReplicaConfig.resolve(parser.parse_args(["--replica", ".."]), {})


@pytest.mark.parametrize("name", list(UNSAFE.values()), ids=list(UNSAFE))
def test_the_operators_models_refuse_it(name: str) -> None:
    with pytest.raises(ValidationError, match=r"metadata\.name"):
        Dataflow.model_validate({**_manifest(name)})
    with pytest.raises(ValidationError, match="name"):
        DesiredDataflow.model_validate({"name": name, "spec": SPEC})
    with pytest.raises(ValidationError, match="source"):
        SourceRelease.model_validate({"dataflow": "d", "source": name, "listed": 1})
    with pytest.raises(ValidationError, match=r"stateDir|state_dir"):
        ReplicaStatus.model_validate({"stateDir": name or "attempts/"})


def test_attempt_state_dirs_the_operator_writes_are_accepted() -> None:
    assert ReplicaStatus.model_validate({"stateDir": ""}).state_dir == ""
    assert ReplicaStatus.model_validate({"stateDir": "attempts/12"}).state_dir == "attempts/12"


@pytest.mark.parametrize("name", list(UNSAFE.values()), ids=list(UNSAFE))
def test_the_layout_refuses_it_where_the_path_is_joined(name: str, tmp_path: Path) -> None:
    state = Location.of(tmp_path / "state")
    with pytest.raises(UnsafePath):
        DataflowLayout.of(state, name)
    layout = DataflowLayout.of(state, "d1")
    with pytest.raises(UnsafePath):
        layout.source_logs(name)
    with pytest.raises(UnsafePath):
        layout.work(name)


def test_a_symbolic_link_out_of_the_state_root_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "state" / "dataflows").mkdir(parents=True)
    os.symlink(outside, tmp_path / "state" / "dataflows" / "d1")
    with pytest.raises(UnsafePath, match="not under"):
        DataflowLayout.of(Location.of(tmp_path / "state"), "d1")
    assert DataflowLayout.of(Location.of(tmp_path / "state"), "d2").root.name == "d2"


@pytest.mark.parametrize("name", list(UNSAFE.values()), ids=list(UNSAFE))
@pytest.mark.parametrize("command", ["peek", "subscribe"])
@pytest.mark.parametrize("argument", ["NAME", "--replica"])
def test_peek_and_subscribe_refuse_it_before_any_request(
    command: str, argument: str, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [command, name] if argument == "NAME" else [command, "d1", "--replica", name]
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--address", "127.0.0.1:9"])
    assert exited.value.code == EXIT_USAGE
    (line,) = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert f"argument {argument}: " in line
