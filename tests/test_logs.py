"""Logging: JSON lines when asked, and no py4j chatter at INFO."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest
import structlog

from dataflow_operator.logs import configure_logging, get_logger


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    """configure_logging changes process-wide state; put it back for the other tests."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    py4j_level = logging.getLogger("py4j").level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    logging.getLogger("py4j").setLevel(py4j_level)
    structlog.reset_defaults()


def test_json_lines_carry_bound_context(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(json=True, level="INFO")
    get_logger("t", namespace="ns", name="r1").info("reconciled", attempt=2)
    line = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert line["event"] == "reconciled"
    assert (line["namespace"], line["name"], line["attempt"]) == ("ns", "r1", 2)
    assert line["level"] == "info" and line["timestamp"].endswith("Z")


def test_py4j_info_is_silenced(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(json=True, level="INFO")
    logging.getLogger("py4j.clientserver").info("Received command c on object id p0")
    logging.getLogger("py4j.clientserver").warning("connection lost")
    err = capsys.readouterr().err
    assert "Received command" not in err
    assert "connection lost" in err
