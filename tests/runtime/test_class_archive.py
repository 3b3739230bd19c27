"""The driver JVM's class archive: where it is, when a driver maps it, how it is written."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dataflow_operator.runtime.class_archive import (
    ARCHIVE_ENV,
    archive_options,
    archive_path,
    default_archive_path,
)
from dataflow_operator.runtime.cli import class_archive as command
from dataflow_operator.runtime.session import with_class_archive

SCRIPT = Path(sys.executable).with_name("dataflow-operator")


def test_the_archive_is_the_variables_path_else_the_users_cache(tmp_path: Path) -> None:
    cache = {"XDG_CACHE_HOME": str(tmp_path)}
    default = default_archive_path(cache)
    assert default is not None and default.parent == tmp_path / "dataflow-operator"
    assert default.name.startswith("spark-classes-") and default.suffix == ".jsa"
    assert archive_path(cache) == default
    assert archive_path({**cache, ARCHIVE_ENV: ""}) == default  # empty: unset
    assert archive_path({**cache, ARCHIVE_ENV: "/opt/x.jsa"}) == Path("/opt/x.jsa")
    assert archive_path({**cache, ARCHIVE_ENV: " OFF "}) is None
    assert default_archive_path({"XDG_CACHE_HOME": "relative/cache"}) is None


def test_a_driver_maps_the_archive_only_when_its_file_is_there(tmp_path: Path) -> None:
    archive = tmp_path / "classes.jsa"
    env = {ARCHIVE_ENV: str(archive)}
    # no file: no option at all (a missing archive would turn off the JVM's own one)
    assert archive_options(archive) == ""
    assert with_class_archive("-Xss4m", env) == "-Xss4m"
    archive.write_bytes(b"x")
    options = with_class_archive("-Xss4m", env)
    assert options.startswith(f"-Xss4m -XX:SharedArchiveFile={archive} -Xshare:auto")
    assert "-Xlog:cds=off" in options  # nothing about archives on run's stdout
    # options that name an archive themselves (the training run) are left alone
    training = f"-XX:ArchiveClassesAtExit={tmp_path / 'new.jsa'}"
    assert with_class_archive(training, env) == training
    assert with_class_archive("-Xss4m", {ARCHIVE_ENV: "off"}) == "-Xss4m"


def _args(output: Path | None) -> argparse.Namespace:
    return argparse.Namespace(output=str(output) if output else None, train=None)


def _child(code: int, writes: bytes | None) -> Any:
    """A stand-in for the training child: writes its partial archive, exits ``code``."""

    def run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        assert kwargs["env"][ARCHIVE_ENV] == "off"  # trained on the JVM's base archive
        if writes is not None:
            Path(argv[argv.index("--train") + 1]).write_bytes(writes)
        return subprocess.CompletedProcess(argv, code)

    return run


def test_the_archive_replaces_the_old_one_only_after_a_clean_training_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "classes.jsa"
    monkeypatch.setattr(command.subprocess, "run", _child(0, b"new"))
    assert command.run(_args(target)) == 0
    assert target.read_bytes() == b"new"
    assert f"wrote {target}" in capsys.readouterr().out
    for code, writes in [(1, b"half"), (0, None)]:  # failed, or exited without writing
        monkeypatch.setattr(command.subprocess, "run", _child(code, writes))
        assert command.run(_args(target)) == 1
        (line,) = capsys.readouterr().err.splitlines()
        assert line.startswith("class-archive: the training run failed") and str(target) in line
        assert target.read_bytes() == b"new"  # what drivers map is never half a file
    assert sorted(p.name for p in tmp_path.iterdir()) == ["classes.jsa"]  # no partial left


def test_bad_output_and_a_turned_off_archive_are_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "file").write_text("not a folder")
    assert command.run(_args(tmp_path / "file" / "classes.jsa")) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("class-archive: --output: cannot make ") and "file" in line
    (tmp_path / "folder.jsa").mkdir()
    monkeypatch.setattr(command.subprocess, "run", _child(0, b"new"))
    assert command.run(_args(tmp_path / "folder.jsa")) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"class-archive: --output: cannot write {tmp_path / 'folder.jsa'}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "folder.jsa"]  # no partial
    monkeypatch.setenv(ARCHIVE_ENV, "off")
    assert command.run(_args(None)) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == "class-archive: DATAFLOW_CLASS_ARCHIVE is 'off': give --output PATH"


def _script(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """The console script as a user runs it, in ``cwd`` with only ``env``."""
    return subprocess.run(
        [str(SCRIPT), *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )


@pytest.mark.spark
@pytest.mark.slow
def test_a_written_archive_is_what_the_next_driver_loads_its_classes_from(
    tmp_path: Path,
) -> None:
    """As a user runs it: the console script writes the archive, then a `run` with it
    loads Spark's classes from it (the JVM's class-loading log names their source)."""
    archive = tmp_path / "classes.jsa"
    clean = {"PATH": "/usr/bin:/bin", "HOME": os.environ["HOME"]}
    written = _script("class-archive", "--output", str(archive), env=clean, cwd=tmp_path)
    assert written.returncode == 0, written.stderr
    assert written.stdout.startswith(f"class-archive: wrote {archive} ("), written.stdout
    assert "[warning]" not in written.stdout + written.stderr  # the JVM's notes are off
    assert [p.name for p in tmp_path.iterdir()] == ["classes.jsa"]  # no partial left
    (tmp_path / "m.yaml").write_text(
        "apiVersion: dataflow.dev/v1alpha1\nkind: Dataflow\nmetadata: {name: one}\n"
        "spec: {cluster: c, kind: Subscribe, sql: SELECT id FROM t,\n"
        "  sources: [{name: t, table: {path: t, schema: id INT}}]}\n"
    )
    assert _script("insert", "t", '{"id": 7}', env=clean, cwd=tmp_path).returncode == 0
    loads = tmp_path / "loads.log"
    logged = {ARCHIVE_ENV: str(archive), "JAVA_TOOL_OPTIONS": f"-Xlog:class+load:file={loads}"}
    run = ("run", "m.yaml", "--clock", "simulated", "--batches", "1")
    ran = _script(*run, env={**clean, **logged}, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines()[-1].endswith("\t1\t7"), ran.stdout
    shared = [
        line for line in loads.read_text().splitlines() if "shared objects file (top)" in line
    ]
    assert any("org.apache.spark.sql.execution.streaming" in line for line in shared), len(shared)
