"""``run`` and ``check`` refuse what cannot make a sensible run, before Spark starts:
an object defined twice (naming both places), ``--until`` before ``--start-time``,
``--batches`` below 1; ``run`` and ``explain`` refuse dataflows the offline checks
refuse, every one of them, before Spark starts."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from dataflow_operator.api.injection import EXIT_FAILED, EXIT_USAGE
from dataflow_operator.cli import main
from dataflow_operator.runtime.cli import explain as explain_command
from dataflow_operator.runtime.cli import run as run_command


def _dataflow(name: str, sql: str = "SELECT x FROM e") -> dict[str, Any]:
    """A valid Dataflow over one table: what is refused is around it, not in it."""
    source = {"name": "e", "table": {"path": "data/e", "schema": "x INT"}}
    return {
        "apiVersion": "dataflow.dev/v1alpha1",
        "kind": "Dataflow",
        "metadata": {"name": name},
        "spec": {"cluster": "default", "kind": "Subscribe", "sources": [source], "sql": sql},
    }


def _replica(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "dataflow.dev/v1alpha1",
        "kind": "Replica",
        "metadata": {"name": name},
        "spec": {"cluster": "default", "executor": {"instances": 0}},
    }


def _no_spark() -> Any:
    raise AssertionError("Spark started for input that was refused")


def _run(*argv: str, session: Any = _no_spark) -> tuple[int, str]:
    parser = argparse.ArgumentParser()
    run_command.configure(parser)
    err = io.StringIO()
    code = run_command.execute(parser.parse_args(list(argv)), session, io.StringIO(), err)
    return code, err.getvalue()


@pytest.fixture
def twice(tmp_path: Path) -> tuple[Path, Path]:
    first = tmp_path / "a.yaml"
    first.write_text(yaml.safe_dump_all([_replica("r1"), _dataflow("d1")]))
    second = tmp_path / "b.yaml"
    second.write_text(
        yaml.safe_dump_all(
            [_dataflow("other"), _dataflow("d1", "SELECT x + 1 AS x FROM e"), _replica("r1")]
        )
    )
    return first, second


def test_run_refuses_a_dataflow_defined_twice_naming_both_places(
    twice: tuple[Path, Path], tmp_path: Path
) -> None:
    first, second = twice
    code, err = _run(str(first), str(second), "--state-dir", str(tmp_path / "state"))
    assert code == EXIT_USAGE
    assert (
        f"{second}: Dataflow/d1: metadata.name: defined twice: in {second} (document 2) "
        f"and in {first} (document 2)"
    ) in err
    assert f"{second}: Replica/r1: metadata.name: defined twice: in {second} (document 3) " in err
    assert not (tmp_path / "state").exists()


def test_check_names_both_places_with_the_document(
    twice: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = twice
    assert main(["check", str(first), str(second)]) == 1
    out = capsys.readouterr().out
    assert f"in {second} (document 2) and in {first} (document 2)" in out
    assert f"in {second} (document 3) and in {first} (document 1)" in out


def test_one_file_with_the_same_dataflow_twice(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump_all([_dataflow("d1"), _dataflow("d1")]))
    code, err = _run(str(path), "--state-dir", str(tmp_path / "state"))
    assert code == EXIT_USAGE
    assert f"defined twice: in {path} (document 2) and in {path} (document 1)" in err


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["--start-time", "2026-01-05T00:00:00Z", "--until", "2026-01-01T00:00:00Z"],
            "run: --until 2026-01-01T00:00:00.000Z is before --start-time 2026-01-05T00:00:00.000Z",
        ),
        (["--batches", "0"], "run: --batches must be at least 1, got 0"),
        (["--batches", "-3"], "run: --batches must be at least 1, got -3"),
    ],
)
def test_stop_arguments_that_make_no_run_are_refused_before_spark(
    argv: list[str], expected: str, tmp_path: Path
) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(_dataflow("d1")))
    code, err = _run(str(path), "--state-dir", str(tmp_path / "state"), *argv)
    assert code == EXIT_USAGE
    assert err.splitlines() == [
        next(line for line in err.splitlines() if line.startswith(expected))
    ]


@pytest.mark.parametrize("where", ["under a file", "under /proc"])
def test_a_state_directory_that_cannot_be_made_is_one_line(where: str, tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(_dataflow("d1")))
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    state = {"under a file": blocker / "state", "under /proc": Path("/proc/no-such/state")}[where]
    code, err = _run(str(path), "--state-dir", str(state))
    assert code == EXIT_USAGE
    (line,) = err.splitlines()
    reason = {
        "under a file": f"{blocker} is a file, not a directory",
        "under /proc": "No such file or directory (in /proc)",
    }[where]
    assert line == (
        f"run: --state-dir {state}: cannot create it: {reason}; choose one you can write to"
    )


def test_the_replica_command_says_so_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert (
        main(["replica", "--state-dir", str(blocker / "state"), "--control-address", "127.0.0.1:0"])
        == EXIT_USAGE
    )
    err = capsys.readouterr().err
    assert (
        f"replica: state location {blocker / 'state'}: cannot create it: {blocker} is a file" in err
    )
    assert "Traceback" not in err


SOURCELESS = "the query reads none of the dataflow's sources"
UNKNOWN_COLUMN = "nope"


@pytest.fixture
def refused(tmp_path: Path) -> Path:
    """Two dataflows the offline checks refuse: one reads no source, one an unknown column."""
    path = tmp_path / "m.yaml"
    path.write_text(
        yaml.safe_dump_all(
            [_dataflow("d1", "SELECT 1 AS x"), _dataflow("d2", f"SELECT {UNKNOWN_COLUMN} FROM e")]
        )
    )
    return path


def test_run_of_dataflows_all_refused_ends_before_spark_with_their_status(
    refused: Path, tmp_path: Path
) -> None:
    status = tmp_path / "status.json"
    code, err = _run(
        str(refused), "--state-dir", str(tmp_path / "state"), "--status-file", str(status)
    )
    assert code == EXIT_FAILED
    lines = err.splitlines()
    assert [line.split(":")[0] for line in lines] == ["dataflow d1", "dataflow d2"]
    assert SOURCELESS in lines[0]
    assert UNKNOWN_COLUMN in lines[1]
    report = json.loads(status.read_text())
    assert report["phase"] == "Stopping"
    assert [(d["name"], d["lastError"]) for d in report["dataflows"]] == [
        ("d1", lines[0].removeprefix("dataflow d1: ")),
        ("d2", lines[1].removeprefix("dataflow d2: ")),
    ]


class _SparkStarted(Exception):
    pass


def _spark_starts() -> Any:
    raise _SparkStarted


def test_run_with_one_dataflow_not_refused_starts_spark(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump_all([_dataflow("d1", "SELECT 1 AS x"), _dataflow("d2")]))
    with pytest.raises(_SparkStarted):
        _run(str(path), "--state-dir", str(tmp_path / "state"), session=_spark_starts)


def test_explain_of_dataflows_all_refused_ends_before_spark(
    refused: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(explain_command, "starting_spark", lambda *_, **__: _no_spark())
    assert main(["explain", str(refused)]) == EXIT_FAILED
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == ["Dataflow/d1", "Dataflow/d2"]
    assert SOURCELESS in lines[0]
    assert UNKNOWN_COLUMN in lines[1]


def test_explain_with_one_dataflow_not_refused_starts_spark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump_all([_dataflow("d1", "SELECT 1 AS x"), _dataflow("d2")]))
    monkeypatch.setattr(explain_command, "starting_spark", lambda *_, **__: _spark_starts())
    with pytest.raises(_SparkStarted):
        main(["explain", str(path)])
