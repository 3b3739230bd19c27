"""Progress after each batch, for a person at a terminal or for a log.

On a terminal (:func:`~dataflow_operator.logs.console_output`) ``run`` and ``replica``
print one compact line per batch on stderr: the batch's time and, per dataflow, its
frontier, and while it hydrates, its plan nodes done / total with a small bar::

    batch 3  2026-01-03T00:00:00.000Z  last-30-days → 2026-01-03T00:00:00.001Z
    batch 1  2026-01-01T00:00:00.000Z  joined → 2026-01-01T00:00:00.001Z hydrating [####······] 2/5

While a batch hydrates a dataflow (its first batch can take long), a watcher thread
(:func:`watch_hydration`) prints a line each time more of its nodes are hydrated::

    hydrating  joined [####······] 2/5

A dataflow's error gets a line of its own, once. One line per batch (not a line redrawn in
place) stays readable when the changelog lines of stdout are interleaved on the same
terminal. Elsewhere (a container's log) each batch is one JSON log event instead.
The renderers are pure functions of a :class:`ReplicaReport`.
"""

from __future__ import annotations

import threading
import time as wall
from collections.abc import Callable
from typing import TextIO, TypeVar

from dataflow_operator.api.protocol import DataflowReport, ReplicaReport
from dataflow_operator.core.time import Timestamp, format_timestamp
from dataflow_operator.logs import get_logger

__all__ = [
    "BatchProgress",
    "bar",
    "render_batch",
    "render_dataflow",
    "render_error",
    "render_hydrating",
    "render_incomplete",
    "starting_spark",
    "watch_hydration",
]

log = get_logger(__name__)
BAR_WIDTH = 10
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
SPIN_INTERVAL_S = 0.1
T = TypeVar("T")


def bar(done: int, total: int, width: int = BAR_WIDTH) -> str:
    """``[####······]``: ``done`` of ``total`` as ``width`` cells."""
    filled = width if total <= 0 else min(width, width * max(done, 0) // total)
    return "[" + "#" * filled + "·" * (width - filled) + "]"


def _frontier(report: DataflowReport) -> str:
    return format_timestamp(report.frontier[0]) if report.frontier else "closed"


def _nodes(report: DataflowReport) -> str:
    """``[bar] done/total`` of its plan nodes ("" before its plan is known)."""
    done, total = sum(node.hydrated for node in report.nodes), len(report.nodes)
    return f"{bar(done, total)} {done}/{total}" if total else ""


def render_dataflow(report: DataflowReport) -> str:
    """``name → frontier``, with ``hydrating [bar] done/total`` until it is hydrated."""
    text = f"{report.name} → {_frontier(report)}"
    if report.expired:
        return f"{text} expired"
    if not report.hydrated:
        text = f"{text} hydrating {_nodes(report)}".rstrip()
    return text


def render_batch(number: int, now: Timestamp, report: ReplicaReport) -> str:
    """One batch's line: its number, its time, and every dataflow that is not failing."""
    parts = [render_dataflow(d) for d in report.dataflows if not d.last_error]
    return f"batch {number}  {format_timestamp(now)}  " + "  ".join(parts)


def render_error(name: str, error: str) -> str:
    """A dataflow's error, on its own line."""
    return f"dataflow {name}: {error}"


def render_incomplete(report: ReplicaReport, end: Timestamp) -> list[str]:
    """One line per dataflow whose output is not complete up to ``end`` (a run's last
    time + 1): how far it is complete. A failed dataflow is told by its error instead."""
    return [
        f"dataflow {d.name}: output incomplete at the end: complete up to "
        f"{format_timestamp(d.frontier[0])}, not {format_timestamp(end)} (its sources' "
        "frontiers are not that far; a changelog source moves by its files' times, its "
        "_upper.json or its lateness: see docs/frontiers.md)"
        for d in report.dataflows
        if not d.last_error and not d.dropping and d.frontier and d.frontier[0] < end
    ]


def render_hydrating(report: ReplicaReport) -> str | None:
    """The dataflows still hydrating, with their bars; ``None`` when none is."""
    parts = [
        f"{d.name} {_nodes(d)}"
        for d in report.dataflows
        if not d.hydrated and not d.last_error and d.nodes
    ]
    return "hydrating  " + "  ".join(parts) if parts else None


def _hydration(report: ReplicaReport) -> tuple[tuple[str, bool, int], ...]:
    return tuple(
        (d.name, d.hydrated, sum(node.hydrated for node in d.nodes)) for d in report.dataflows
    )


class BatchProgress:
    """Reports each batch: new errors on stderr, then a console line or a JSON log event.

    ``console``: lines for a person (see the module docstring), at most one per
    ``interval`` seconds of wall time unless hydration moved or it is the first; else
    one ``batch`` log event per batch. ``reported``: dataflows whose error is already told.
    """

    def __init__(
        self,
        err: TextIO,
        *,
        console: bool,
        interval: float = 0.0,
        reported: set[str] | None = None,
        clock: Callable[[], float] = wall.monotonic,
    ) -> None:
        self.err = err
        self.console = console
        self.interval = interval
        self.reported = set(reported or ())
        self.clock = clock
        self.batches = 0
        self._last_line: float | None = None
        self._last_hydration: tuple[tuple[str, bool, int], ...] = ()
        self._lock = threading.Lock()

    def __call__(self, report: ReplicaReport, now: Timestamp | None, expired: bool) -> None:
        """After a batch at ``now`` (``expired``: the replica stopped at its expiration)."""
        self.batches += 1
        for dataflow in report.dataflows:
            if dataflow.last_error and dataflow.name not in self.reported:
                self.reported.add(dataflow.name)
                print(render_error(dataflow.name, dataflow.last_error), file=self.err, flush=True)
        if now is None or expired:
            return
        if not self.console:
            log.info(
                "batch",
                number=self.batches,
                time=format_timestamp(now),
                frontiers={d.name: _frontier(d) for d in report.dataflows if not d.last_error},
                hydrated=[d.name for d in report.dataflows if d.hydrated],
            )
            return
        with self._lock:
            hydration = _hydration(report)
            moment = self.clock()
            due = self._last_line is None or moment - self._last_line >= self.interval
            if due or hydration != self._last_hydration:
                self._last_line = moment
                self._last_hydration = hydration
                print(render_batch(self.batches, now, report), file=self.err, flush=True)

    def hydrating(self, report: ReplicaReport) -> None:
        """Between batches: a line when a hydrating dataflow's nodes moved (console only)."""
        with self._lock:
            hydration = _hydration(report)
            line = render_hydrating(report)
            if hydration != self._last_hydration and line is not None:
                print(line, file=self.err, flush=True)
            self._last_hydration = hydration


def watch_hydration(
    progress: BatchProgress,
    report: Callable[[], ReplicaReport],
    stop: threading.Event,
    interval: float = 0.5,
) -> threading.Thread:
    """Poll ``report`` every ``interval`` seconds until ``stop``, telling ``progress``."""

    def watch() -> None:
        while not stop.wait(interval):
            progress.hydrating(report())

    thread = threading.Thread(target=watch, name="hydration-progress", daemon=True)
    thread.start()
    return thread


def starting_spark(
    master: str,
    start: Callable[[], T],
    err: TextIO,
    *,
    spinner: bool,
    clock: Callable[[], float] = wall.monotonic,
) -> T:
    """``start()`` (which starts Spark), told on ``err``: ``starting Spark (MASTER)…``
    before, ``Spark is up (MASTER, N.N s)`` after; with ``spinner`` (a terminal) a
    spinner and the seconds so far redrawn on the first line meanwhile."""
    began = clock()
    line = f"starting Spark ({master})…"
    done = threading.Event()
    spinning: threading.Thread | None = None
    if spinner:

        def spin() -> None:
            turn = 0
            while not done.wait(SPIN_INTERVAL_S):
                turn += 1
                frame = SPINNER[turn % len(SPINNER)]
                err.write(f"\r{frame} {line} {clock() - began:.0f}s")
                err.flush()

        err.write(line)
        err.flush()
        spinning = threading.Thread(target=spin, name="spark-spinner", daemon=True)
        spinning.start()
    else:
        print(line, file=err, flush=True)
    try:
        started = start()
    finally:
        done.set()
        if spinning is not None:
            spinning.join()
            err.write(f"\r{line}\033[K\n")  # the spinner's line becomes the first line
    print(f"Spark is up ({master}, {clock() - began:.1f} s)", file=err, flush=True)
    return started
