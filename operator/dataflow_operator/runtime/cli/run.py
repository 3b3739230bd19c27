"""``dataflow-operator run FILE...``: one replica in Spark local mode, on a laptop.

Runs the Dataflows of the manifests (those of one Replica's cluster, if one is given:
:mod:`.selection`) with a simulated or wall clock, prints the changelog of Subscribe dataflows as
``TIME<TAB>DIFF<TAB>col1<TAB>col2…`` on stdout, progress on stderr, and the replica's
status as JSON to ``--status-file`` after every batch. Exits with
:data:`~dataflow_operator.api.injection.EXIT_EXPIRED` when the replica expires.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
import threading
import time as wall
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from dataflow_operator.api.catalog import first_problems
from dataflow_operator.api.dataflow import Dataflow
from dataflow_operator.api.injection import EXIT_FAILED, EXIT_USAGE
from dataflow_operator.api.loading import Manifest, duplicate_problems, load_paths
from dataflow_operator.api.protocol import DataflowReport, ReplicaPhase, ReplicaReport
from dataflow_operator.api.replica import Replica
from dataflow_operator.core.durations import Duration, parse_duration
from dataflow_operator.core.errors import DomainError
from dataflow_operator.core.time import Timestamp, format_timestamp, parse_timestamp
from dataflow_operator.logs import configure_logging, console_output, get_logger
from dataflow_operator.runtime.cli.printer import SubscribePrinter
from dataflow_operator.runtime.cli.progress import (
    BatchProgress,
    render_error,
    render_incomplete,
    starting_spark,
    watch_hydration,
)
from dataflow_operator.runtime.cli.selection import Selection, select
from dataflow_operator.runtime.cli.state_dir import state_dir_problem
from dataflow_operator.runtime.clock import TickPlan, atomic_write_text
from dataflow_operator.runtime.errors import quiet_repeated_error_logs
from dataflow_operator.runtime.service import UnknownDataflow

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from dataflow_operator.runtime.engine.config import EngineConfig
    from dataflow_operator.runtime.engine.engine import Engine

__all__ = ["configure", "execute", "run"]

log = get_logger(__name__)
DEFAULT_STATE_DIR = "state"
DEFAULT_MASTER = "local[*]"
INTERRUPTED = 130
"""The exit code after Ctrl-C."""
QUIET_LOG_LEVEL = "OFF"
"""Spark's own log level in ``run``: errors are reported as one line per dataflow."""
CONSOLE_INTERVAL_S = 1.0
"""On a terminal with the wall clock: at most one progress line a second (but every
change of hydration)."""


def _timestamp(text: str) -> Timestamp:
    try:
        return parse_timestamp(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _duration(text: str) -> Duration:
    try:
        return parse_duration(text)
    except DomainError as error:
        raise argparse.ArgumentTypeError(error.message) from None


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``run``."""
    parser.add_argument(
        "files",
        nargs="+",
        type=Path,
        metavar="FILE",
        help="manifests: the Dataflows of one Replica's cluster run (all, without one; see "
        "--replica)",
    )
    parser.add_argument(
        "--start-time", type=_timestamp, help="replica start (RFC 3339 or epoch ms; default now)"
    )
    parser.add_argument(
        "--expiration-offset",
        type=_duration,
        help="expiration offset (default: the Replica manifest's; 0 disables)",
    )
    parser.add_argument(
        "--clock",
        choices=["wall", "simulated"],
        default="wall",
        help="wall: batches at the wall clock's time; simulated: --start-time + k * --tick",
    )
    parser.add_argument("--tick", type=_duration, help="time between batches (default 1s)")
    stop = parser.add_mutually_exclusive_group()
    stop.add_argument("--until", type=_timestamp, help="stop once the output is complete to T")
    stop.add_argument("--batches", type=int, help="stop after N batches")
    parser.add_argument(
        "--state-dir",
        default=DEFAULT_STATE_DIR,
        metavar="PATH|URI",
        help="the state location (a path, file://, s3a://, gs://, abfss:// or hdfs:// URI): "
        "checkpoints and changelogs; a later run with the same one resumes (default: state)",
    )
    parser.add_argument(
        "--master",
        default=DEFAULT_MASTER,
        help="Spark master (default local[*]); local-cluster[N,CORES,MEM_MB] runs N executors "
        "as separate processes",
    )
    parser.add_argument(
        "--status-file", type=Path, help="write the replica status JSON here after each batch"
    )
    parser.add_argument(
        "--reset",
        action="append",
        default=[],
        metavar="NAME",
        help="let dataflow NAME start over on state made for another spec (its old output "
        "is not retracted); repeatable",
    )
    parser.add_argument(
        "--replica",
        metavar="NAME",
        help="run this Replica's cluster (default: the only Replica given, or of several "
        "the one of cluster default, else the first)",
    )
    parser.add_argument(
        "--dataflow",
        metavar="NAME",
        help="print only this Subscribe's changelog (with several, each line starts with "
        "its dataflow's name)",
    )


def _refused(args: argparse.Namespace, manifests: list[Manifest]) -> list[str]:
    """Why nothing may run, one line each (empty: it may): an object defined twice, or
    clock and stop arguments that make no run."""
    twice = [str(problem) for problem in duplicate_problems(manifests)]
    if twice:
        return [*twice, "run: an object defined twice is ambiguous; nothing ran"]
    problem = _argument_problem(args)
    return [] if problem is None else [f"run: {problem}"]


def _argument_problem(args: argparse.Namespace) -> str | None:
    """Why the stop arguments cannot make a run, or None (checked before Spark starts)."""
    if args.tick is not None and args.tick.is_zero:
        return "--tick must be positive"
    if args.batches is not None and args.batches <= 0:
        return f"--batches must be at least 1, got {args.batches}"
    if args.until is not None and args.start_time is not None and args.until < args.start_time:
        return (
            f"--until {format_timestamp(args.until)} is before --start-time "
            f"{format_timestamp(args.start_time)}: give a later --until"
        )
    return None


def run(args: argparse.Namespace) -> int:
    """Run the replica in a Spark session of its own; see the module docstring."""
    configure_logging()
    logging.getLogger("py4j").setLevel(logging.WARNING)
    quiet_repeated_error_logs()
    from dataflow_operator.runtime.session import spark_session

    spark = None

    def start() -> SparkSession:
        started = spark_session(
            master=args.master,
            app_name="dataflow-run",
            conf={"spark.ui.showConsoleProgress": "false"},
        )
        started.sparkContext.setLogLevel(QUIET_LOG_LEVEL)
        return started

    def session() -> SparkSession:
        nonlocal spark
        spark = starting_spark(args.master, start, sys.stderr, spinner=sys.stderr.isatty())
        return spark

    try:
        return execute(args, session, sys.stdout, sys.stderr)
    finally:
        if spark is not None:
            spark.stop()


def execute(
    args: argparse.Namespace,
    session: Callable[[], SparkSession],
    out: TextIO,
    err: TextIO,
) -> int:
    """The ``run`` command over a Spark session from ``session`` (which it does not stop)."""
    manifests, problems = load_paths(args.files)
    for problem in problems:
        print(str(problem), file=err)
    chosen = _choose(args, manifests, err)
    if chosen is None:
        return EXIT_USAGE
    replica, dataflows = chosen.replica, chosen.dataflows
    offset = args.expiration_offset
    if offset is None and replica is not None:
        offset = replica.spec.expiration_offset
    start = args.start_time if args.start_time is not None else int(wall.time() * 1000)
    tick = args.tick or Duration(1000)
    unusable = state_dir_problem(args.state_dir, "--state-dir")
    if unusable is not None:
        print(f"run: {unusable}", file=err)
        return EXIT_USAGE

    from dataflow_operator.runtime.engine.config import EngineConfig
    from dataflow_operator.runtime.engine.engine import Engine, dataflows_from
    from dataflow_operator.runtime.engine.loop import run_plan
    from dataflow_operator.runtime.engine.partitions import state_partitions

    config = EngineConfig(
        state_dir=args.state_dir,
        start_time=start,
        expiration_offset=offset,
        state_partitions=state_partitions(args.master, {}),
        release_upstream=True,  # a local run is its own cluster: nobody else reads its input
        reset=frozenset(getattr(args, "reset", None) or ()),
    )
    if _all_refused(dataflows, config, args.status_file, err):
        return EXIT_FAILED
    engine = Engine(session(), config)
    expiration = config.expiration
    log.info(
        "replica starting",
        start=format_timestamp(start),
        expiration=format_timestamp(expiration) if expiration is not None else None,
        dataflows=len(dataflows),
    )
    result = engine.apply(dataflows_from((d.metadata.name, d.spec) for d in dataflows))
    for name, error in result.failed.items():
        print(render_error(name, str(error)), file=err)
    printer = SubscribePrinter(out, chosen.printed)
    for name in sorted(chosen.printed):
        with contextlib.suppress(UnknownDataflow):  # failed to install: said above
            printer.follow(name, engine.changelog(name).store)
    printer.flush()  # what a killed run committed and did not print, first
    console = console_output(err)
    batches = BatchProgress(
        err,
        console=console,
        interval=0.0 if args.clock == "simulated" else CONSOLE_INTERVAL_S,
        reported=set(result.failed),
    )
    progress = _Progress(batches, args.status_file, printer)
    watching = threading.Event()
    if console:
        watch_hydration(batches, engine.report, watching)
    plan = TickPlan(
        start=start,
        tick=tick.millis,
        simulated=args.clock == "simulated",
        until=args.until,
        batches=args.batches,
    )
    try:
        code = run_plan(engine, plan, after_batch=progress)
    except KeyboardInterrupt:
        code = INTERRUPTED
    finally:
        watching.set()
        printer.flush()
        final = engine.report()  # the last state, before the queries stop
        if args.status_file is not None:
            write_status(final, args.status_file)
        engine.close()
    _tell_end(engine, final, code, err)
    return code


def _all_refused(
    dataflows: list[Dataflow], config: EngineConfig, status_file: Path | None, err: TextIO
) -> bool:
    """True, having said why, when what a replica checks before planning refuses every
    one of ``dataflows`` (:func:`~dataflow_operator.api.catalog.first_problems`): the run
    then ends without starting Spark, its status file reporting each one's error as a
    started run's would."""
    problems = first_problems(dataflows)
    if not dataflows or not all(problems):
        return False
    reports = []
    for dataflow, problem in zip(dataflows, problems, strict=True):
        assert problem is not None
        print(render_error(dataflow.metadata.name, str(problem.error)), file=err)
        reports.append(DataflowReport(name=dataflow.metadata.name, last_error=str(problem.error)))
    if status_file is not None:
        report = ReplicaReport(
            start_time=config.start_time,
            expiration=config.expiration,
            phase=ReplicaPhase.STOPPING,
            dataflows=reports,
        )
        write_status(report, status_file)
    return True


def _choose(args: argparse.Namespace, manifests: list[Manifest], err: TextIO) -> Selection | None:
    """What to run: the Replica and its Dataflows, saying which and what is skipped; or
    ``None``, having said why nothing may run."""
    refused = _refused(args, manifests)
    if refused:
        print("\n".join(refused), file=err)
        return None
    chosen = select(
        [m.resource for m in manifests if isinstance(m.resource, Replica)],
        [m.resource for m in manifests if isinstance(m.resource, Dataflow)],
        replica_name=getattr(args, "replica", None),
        dataflow_name=getattr(args, "dataflow", None),
    )
    if isinstance(chosen, str):
        print(chosen, file=err)
        return None
    for note in chosen.notes:
        print(note, file=err)
    if not chosen.dataflows:
        print("run: no Dataflow to run in the given files", file=err)
        return None
    return chosen


def _tell_end(engine: Engine, final: ReplicaReport, code: int, err: TextIO) -> None:
    """The run's last lines: its expiration, or the dataflows whose output it left
    incomplete (not after an interrupt)."""
    from dataflow_operator.runtime.engine.config import expired_message

    expiration = engine.config.expiration
    if engine.expired_at is not None and expiration is not None:
        print(expired_message(engine.expired_at, expiration), file=err)
    elif code != INTERRUPTED and engine.now is not None:
        for line in render_incomplete(final, engine.now + 1):
            print(line, file=err)


class _Progress:
    """After each step: print its Subscribe lines, report progress
    (:mod:`~dataflow_operator.runtime.cli.progress`) and write the status file."""

    def __init__(
        self, progress: BatchProgress, status_file: Path | None, printer: SubscribePrinter
    ) -> None:
        self.progress = progress
        self.status_file = status_file
        self.printer = printer

    def __call__(self, engine: Engine) -> None:
        self.printer.flush()
        self.progress(engine.report(), engine.now, engine.expired_at is not None)
        if self.status_file is not None:
            write_status(engine.report(), self.status_file)


def write_status(report: ReplicaReport, path: Path) -> None:
    """The replica's report as JSON, replaced atomically (``--status-file``)."""
    atomic_write_text(path, json.dumps(report.to_wire(), indent=2) + "\n")
