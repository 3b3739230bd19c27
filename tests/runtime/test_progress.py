"""Progress for a person at a terminal: pure renderings of sample reports, and when."""

from __future__ import annotations

import io
import json
import logging
import threading
from collections.abc import Iterator

import pytest
import structlog

from dataflow_operator.api.dataflow import NodeStatus
from dataflow_operator.api.protocol import DataflowReport, ReplicaPhase, ReplicaReport
from dataflow_operator.logs import configure_logging
from dataflow_operator.runtime.cli.progress import (
    BatchProgress,
    bar,
    render_batch,
    render_dataflow,
    render_error,
    render_hydrating,
    watch_hydration,
)

DAY = 86_400_000
JAN_1 = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def _nodes(done: int, total: int) -> list[NodeStatus]:
    return [NodeStatus(id=i + 1, operator="Project", hydrated=i < done) for i in range(total)]


def _report(*dataflows: DataflowReport) -> ReplicaReport:
    return ReplicaReport(start_time=JAN_1, phase=ReplicaPhase.RUNNING, dataflows=list(dataflows))


def test_the_bar_fills_with_the_nodes_done() -> None:
    assert bar(0, 4) == "[··········]"
    assert bar(2, 4) == "[#####·····]"
    assert bar(4, 4) == "[##########]"
    assert bar(1, 3, width=3) == "[#··]"
    assert bar(0, 0) == "[##########]"  # nothing to hydrate: done


def test_a_dataflow_reads_as_its_frontier_and_its_hydration() -> None:
    hydrated = DataflowReport(name="recent", frontier=[JAN_1 + DAY], hydrated=True)
    assert render_dataflow(hydrated) == "recent → 2026-01-02T00:00:00.000Z"
    hydrating = DataflowReport(name="joined", frontier=[JAN_1], nodes=_nodes(2, 5))
    assert (
        render_dataflow(hydrating) == "joined → 2026-01-01T00:00:00.000Z hydrating [####······] 2/5"
    )
    assert render_dataflow(DataflowReport(name="x")) == "x → closed hydrating"
    expired = DataflowReport(name="e", frontier=[JAN_1], hydrated=True, expired=True)
    assert render_dataflow(expired) == "e → 2026-01-01T00:00:00.000Z expired"


def test_a_batch_is_one_line_without_the_failing_dataflows() -> None:
    report = _report(
        DataflowReport(name="a", frontier=[JAN_1 + 2 * DAY], hydrated=True),
        DataflowReport(name="b", last_error="AnalysisException: no column x"),
        DataflowReport(name="c", frontier=[JAN_1 + 2 * DAY], nodes=_nodes(1, 2)),
    )
    line = render_batch(3, JAN_1 + 2 * DAY, report)
    assert line == (
        "batch 3  2026-01-03T00:00:00.000Z  a → 2026-01-03T00:00:00.000Z"
        "  c → 2026-01-03T00:00:00.000Z hydrating [#####·····] 1/2"
    )
    assert "\n" not in line
    assert render_error("b", "boom") == "dataflow b: boom"


def test_console_progress_tells_errors_once_and_throttles_quiet_batches() -> None:
    err = io.StringIO()
    moments = iter([0.0, 0.2, 0.4, 1.5])
    progress = BatchProgress(err, console=True, interval=1.0, clock=lambda: next(moments))
    failing = DataflowReport(name="b", last_error="boom")
    hydrating = DataflowReport(name="a", frontier=[JAN_1], nodes=_nodes(0, 2))
    progress(_report(hydrating, failing), JAN_1, expired=False)  # first: shown
    progress(_report(hydrating, failing), JAN_1 + 1, expired=False)  # quiet: skipped
    moved = DataflowReport(name="a", frontier=[JAN_1 + 2], nodes=_nodes(1, 2))
    progress(_report(moved, failing), JAN_1 + 2, expired=False)  # hydration moved: shown
    done = DataflowReport(name="a", frontier=[JAN_1 + 3], nodes=_nodes(2, 2), hydrated=True)
    progress(_report(done, failing), JAN_1 + 3, expired=False)  # a second passed: shown
    lines = err.getvalue().splitlines()
    assert lines[0] == "dataflow b: boom"
    assert [line.split("  ")[0] for line in lines[1:]] == ["batch 1", "batch 3", "batch 4"]
    assert lines[-1].endswith("a → 2026-01-01T00:00:00.003Z")
    assert all(not line.startswith("{") for line in lines)


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    structlog.reset_defaults()


@pytest.mark.usefixtures("restore_logging")
def test_elsewhere_each_batch_is_a_json_event(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(json=True)
    err = io.StringIO()
    progress = BatchProgress(err, console=False)
    report = _report(DataflowReport(name="a", frontier=[JAN_1], hydrated=True))
    progress(report, JAN_1, expired=False)
    progress(report, JAN_1, expired=True)  # the expiration message says it: no batch event
    events = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert [(e["event"], e["number"], e["frontiers"]) for e in events] == [
        ("batch", 1, {"a": "2026-01-01T00:00:00.000Z"})
    ]
    assert err.getvalue() == ""


def test_hydration_between_batches_is_a_line_each_time_nodes_move() -> None:
    err = io.StringIO()
    progress = BatchProgress(err, console=True)
    reports = iter(
        [
            _report(DataflowReport(name="j", nodes=_nodes(0, 4))),
            _report(DataflowReport(name="j", nodes=_nodes(0, 4))),  # no change: no line
            _report(DataflowReport(name="j", nodes=_nodes(3, 4))),
            _report(DataflowReport(name="j", nodes=_nodes(4, 4), hydrated=True)),  # done
        ]
    )
    stop = threading.Event()
    seen: list[int] = []

    def report() -> ReplicaReport:
        seen.append(1)
        try:
            return next(reports)
        except StopIteration:
            stop.set()
            return _report(DataflowReport(name="j", nodes=_nodes(4, 4), hydrated=True))

    watch_hydration(progress, report, stop, interval=0.01).join(timeout=10)
    assert len(seen) == 5
    assert err.getvalue().splitlines() == [
        "hydrating  j [··········] 0/4",
        "hydrating  j [#######···] 3/4",
    ]
    assert render_hydrating(_report(DataflowReport(name="j", hydrated=True))) is None
