"""Logging: JSON lines when asked, and no py4j chatter at INFO."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
import structlog

from dataflow_operator.logs import FORMAT_ENV, configure_logging, console_output, get_logger


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    """configure_logging changes process-wide state; put it back for the other tests."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    py4j_level = logging.getLogger("py4j").level
    config = structlog.get_config()
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    logging.getLogger("py4j").setLevel(py4j_level)
    structlog.configure(**config)


def test_json_lines_carry_bound_context(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(json=True, level="INFO")
    get_logger("t", namespace="ns", name="r1").info("reconciled", attempt=2)
    line = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert line["event"] == "reconciled"
    assert (line["namespace"], line["name"], line["attempt"]) == ("ns", "r1", 2)
    assert line["level"] == "info" and line["timestamp"].endswith("Z")


def test_json_lines_keep_the_exception_of_a_logged_failure(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging(json=True, level="INFO")
    try:
        raise LookupError("no such key")
    except LookupError:
        get_logger("t").exception("status computation failed", name="df1")
    line = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    (raised,) = line["exception"]
    assert (raised["exc_type"], raised["exc_value"]) == ("LookupError", "no such key")
    assert raised["frames"] and "exc_info" not in line


def test_py4j_info_is_silenced(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(json=True, level="INFO")
    logging.getLogger("py4j.clientserver").info("Received command c on object id p0")
    logging.getLogger("py4j.clientserver").warning("connection lost")
    err = capsys.readouterr().err
    assert "Received command" not in err
    assert "connection lost" in err


class _Stream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize(
    ("tty", "env", "console"),
    [
        (True, {}, True),
        (False, {}, False),
        (True, {FORMAT_ENV: "json"}, False),
        (False, {FORMAT_ENV: "console"}, True),
        (True, {FORMAT_ENV: "JSON "}, False),
        (False, {FORMAT_ENV: ""}, False),
    ],
)
def test_readable_on_a_terminal_json_elsewhere_unless_forced(
    tty: bool, env: dict[str, str], console: bool
) -> None:
    assert console_output(_Stream(tty), env) is console


def test_the_log_format_follows_the_same_choice(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(FORMAT_ENV, "console")
    configure_logging(level="INFO")
    get_logger("t").info("replica starting", replica="r1")
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert "replica starting" in line and "replica=r1" in line and not line.startswith("{")


def _fail_holding_a_secret() -> None:
    token = "s3cr3t-bearer-token"  # noqa: F841 (a local a traceback with locals would show)
    raise PermissionError("denied")


@pytest.mark.parametrize("json_lines", [True, False])
def test_a_logged_exception_shows_its_frames_but_not_their_local_variables(
    capsys: pytest.CaptureFixture[str], json_lines: bool
) -> None:
    configure_logging(json=json_lines, level="INFO")
    try:
        _fail_holding_a_secret()
    except PermissionError:
        get_logger("t").exception("request failed")
    err = capsys.readouterr().err
    assert "_fail_holding_a_secret" in err and "denied" in err
    assert "s3cr3t-bearer-token" not in err
