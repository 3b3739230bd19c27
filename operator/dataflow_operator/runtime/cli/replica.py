"""``dataflow-operator replica``: the driver pod's entry point.

Reads the configuration the operator injects (:mod:`dataflow_operator.api.injection`:
environment first, then the ``spark.dataflow.*`` twins in ``DATAFLOW_SPARK_CONF``;
command-line flags override both), serves the control API
(:mod:`dataflow_operator.runtime.serve`) at once (``/healthz`` answers while Spark
starts, ``/status`` says ``Starting``; ``/readyz``, ``PUT /dataflows`` and the rest
answer 503 until the engine is up; then the phase is ``Running``, ``/readyz`` answers
200 and the log says ``replica ready``, whether or not a desired set came yet), starts
Spark (``DATAFLOW_SPARK_MASTER`` / ``--master``: ``k8s://…`` in a cluster, ``local[*]``
otherwise; every setting of ``DATAFLOW_SPARK_CONF`` and ``--conf`` passes through; told
as ``starting Spark`` and ``Spark is up``), builds the engine and advances the dataflows
on the wall clock until:

- SIGTERM or SIGINT: stops the queries and exits 0 (graceful);
- the replica's expiration: exits :data:`~dataflow_operator.api.injection.EXIT_EXPIRED`
  (75) with ``replica expired. now: …, expiration: …`` on stderr, before any batch at or
  past it, so that the operator restarts it with a new start time.

When ``DATAFLOW_CONTROL_TOKEN_FILE`` names a file, the control API requires the token in
it (read once at start). Bad configuration exits 2 with one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import threading
import time as wall
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from dataflow_operator.api import injection
from dataflow_operator.core.durations import Duration, parse_duration
from dataflow_operator.core.errors import DomainError
from dataflow_operator.core.expiration import replica_expiration
from dataflow_operator.core.time import Timestamp, format_timestamp, parse_timestamp
from dataflow_operator.logs import configure_logging, console_output, get_logger
from dataflow_operator.runtime.cli.attempt_names import attempt_names
from dataflow_operator.runtime.cli.progress import BatchProgress, starting_spark, watch_hydration
from dataflow_operator.runtime.cli.state_dir import state_dir_problem
from dataflow_operator.runtime.engine.attempt_state import prune_attempt_states
from dataflow_operator.runtime.errors import quiet_repeated_error_logs
from dataflow_operator.runtime.serve import ControlServer, parse_address, read_token
from dataflow_operator.runtime.serve.starting import StartingService
from dataflow_operator.runtime.storage import Location, StorageError, hadoop_conf

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from dataflow_operator.runtime.engine.engine import Engine

__all__ = ["ConfigError", "ReplicaConfig", "configure", "execute", "run", "start_serving"]

log = get_logger(__name__)

LOCAL_MASTER = "local[*]"
EXECUTOR_POD_TEMPLATE_CONF = "spark.kubernetes.executor.podTemplateFile"
DEFAULT_TICK_MS = 1000
QUIET_LOG_LEVEL = "ERROR"
CONSOLE_INTERVAL_S = 1.0


class ConfigError(ValueError):
    """The injected configuration is unusable (one line says why)."""


@dataclass(frozen=True, slots=True)
class ReplicaConfig:
    """Everything the replica needs to start, resolved from flags, environment and conf."""

    start_time: Timestamp
    expiration_offset: Duration | None
    master: str
    control_address: str
    state_dir: str
    """The state location: a path or URI (``DATAFLOW_STATE_URI``)."""
    spark_conf: dict[str, str] = field(default_factory=dict)
    replica: str = "local"
    namespace: str | None = None
    cluster: str | None = None
    attempt: str | None = None
    tick_ms: int = DEFAULT_TICK_MS
    control_token: str | None = field(default=None, repr=False)
    """The token the control API requires (read from the file named by
    ``DATAFLOW_CONTROL_TOKEN_FILE``); ``None``: open."""
    keep_state: str | None = None
    """A make-before-break successor's predecessor's state (``DATAFLOW_STATE_KEEP``):
    every other attempt's state is removed at start."""
    warm_up: bool = True
    """Run a small dataflow of its own before saying ready (:mod:`...engine.warm_up`)."""
    reset: frozenset[str] = frozenset()
    """Dataflows that may start over on state made for another spec without a new
    generation (``--reset``; see :meth:`.Engine.apply`)."""

    @property
    def labels(self) -> dict[str, str]:
        """Labels for the replica's metrics."""
        found = {"replica": self.replica, "namespace": self.namespace, "cluster": self.cluster}
        return {key: value for key, value in found.items() if value}

    @classmethod
    def resolve(
        cls,
        args: argparse.Namespace,
        env: Mapping[str, str],
        now: Callable[[], Timestamp] = lambda: int(wall.time() * 1000),
    ) -> ReplicaConfig:
        """Flags over environment over the conf twins. Raises :class:`ConfigError`."""
        conf = _spark_conf(env.get(injection.ENV_SPARK_CONF))
        for item in args.conf or []:
            key, sep, value = item.partition("=")
            if not sep or not key:
                raise ConfigError(f"--conf wants KEY=VALUE, got {item!r}")
            conf[key] = value
        start = _start_time(args.start_time, env, conf, now)
        offset_text = _first(
            args.expiration_offset,
            env.get(injection.ENV_EXPIRATION_OFFSET),
            conf.get(injection.CONF_EXPIRATION_OFFSET),
        )
        try:
            offset = parse_duration(offset_text) if offset_text else None
        except DomainError as error:
            raise ConfigError(f"expiration offset {offset_text!r}: {error.message}") from None
        if offset is not None and offset.is_zero:
            offset = None
        conf.setdefault(injection.CONF_START_TIME_MS, str(start))
        if offset is not None:
            conf.setdefault(injection.CONF_EXPIRATION_OFFSET, str(offset))
        address = _first(args.control_address, env.get(injection.ENV_CONTROL_ADDRESS)) or ""
        try:
            parse_address(address)
        except ValueError as error:
            raise ConfigError(str(error)) from None
        try:
            replica, attempt, keep_state = attempt_names(args.replica, env)
        except ValueError as error:
            raise ConfigError(str(error)) from None
        state_dir = _first(
            args.state_dir, env.get(injection.ENV_STATE_URI), env.get(injection.ENV_STATE_DIR)
        ) or str(Path(tempfile.gettempdir()) / "dataflow-replica" / replica)
        try:
            location = Location.of(state_dir)
        except StorageError as error:
            raise ConfigError(f"state location: {error}") from None
        for key, value in hadoop_conf(location, env).items():
            conf.setdefault(key, value)
        master = _first(args.master, env.get(injection.ENV_SPARK_MASTER)) or LOCAL_MASTER
        template = env.get(injection.ENV_EXECUTOR_POD_TEMPLATE)
        if template and master.startswith("k8s://"):
            conf.setdefault(EXECUTOR_POD_TEMPLATE_CONF, str(write_pod_template(template)))
        try:
            tick = parse_duration(args.tick).millis if args.tick else DEFAULT_TICK_MS
        except DomainError as error:
            raise ConfigError(f"--tick {args.tick!r}: {error.message}") from None
        if tick <= 0:
            raise ConfigError("--tick must be positive")
        token_file = env.get(injection.ENV_CONTROL_TOKEN_FILE)
        try:
            token = read_token(Path(token_file)) if token_file else None
        except (OSError, ValueError) as error:
            raise ConfigError(f"{injection.ENV_CONTROL_TOKEN_FILE}: {error}") from None
        return cls(
            start_time=start,
            expiration_offset=offset,
            master=master,
            control_address=address,
            state_dir=state_dir,
            spark_conf=conf,
            replica=replica,
            namespace=env.get(injection.ENV_NAMESPACE) or None,
            cluster=env.get(injection.ENV_CLUSTER) or None,
            attempt=attempt,
            tick_ms=tick,
            control_token=token,
            keep_state=keep_state,
            reset=frozenset(getattr(args, "reset", None) or ()),
            warm_up=not args.no_warm_up,
        )


def write_pod_template(text: str) -> Path:
    """Write the injected executor pod template (JSON) where Spark reads it; its path.

    Spark's Kubernetes backend reads the template file when it first asks for executors,
    so the driver writes it once at start-up.
    """
    try:
        pod = json.loads(text)
    except ValueError as error:
        raise ConfigError(f"{injection.ENV_EXECUTOR_POD_TEMPLATE}: not JSON: {error}") from None
    if not isinstance(pod, dict) or pod.get("kind", "Pod") != "Pod":
        raise ConfigError(f"{injection.ENV_EXECUTOR_POD_TEMPLATE}: not a Pod object")
    directory = Path(tempfile.mkdtemp(prefix="dataflow-executor-"))
    path = directory / "executor-pod-template.json"
    path.write_text(json.dumps(pod), encoding="utf-8")
    return path


def _first(*values: str | None) -> str | None:
    return next((value for value in values if value), None)


def _spark_conf(text: str | None) -> dict[str, str]:
    if not text:
        return {}
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise ConfigError(f"{injection.ENV_SPARK_CONF} is not JSON: {error}") from None
    if not isinstance(document, dict):
        raise ConfigError(f"{injection.ENV_SPARK_CONF} must be a JSON object")
    return {str(key): str(value) for key, value in document.items()}


def _start_time(
    flag: str | None, env: Mapping[str, str], conf: Mapping[str, str], now: Callable[[], int]
) -> Timestamp:
    for name, text in (
        ("--start-time", flag),
        (injection.ENV_START_TIME_MS, env.get(injection.ENV_START_TIME_MS)),
        (injection.ENV_START_TIME, env.get(injection.ENV_START_TIME)),
        (injection.CONF_START_TIME_MS, conf.get(injection.CONF_START_TIME_MS)),
    ):
        if text:
            try:
                return parse_timestamp(text)
            except ValueError as error:
                raise ConfigError(f"{name} {text!r}: {error}") from None
    return now()


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``replica`` (each overrides the injected environment)."""
    parser.add_argument("--master", help=f"Spark master (env {injection.ENV_SPARK_MASTER})")
    parser.add_argument(
        "--control-address",
        metavar="HOST:PORT",
        help=f"control API address (env {injection.ENV_CONTROL_ADDRESS}; default 0.0.0.0:8765)",
    )
    parser.add_argument(
        "--state-dir",
        metavar="PATH|URI",
        help=f"the state location (env {injection.ENV_STATE_URI}, else {injection.ENV_STATE_DIR})",
    )
    parser.add_argument(
        "--start-time", help=f"epoch ms or RFC 3339 (env {injection.ENV_START_TIME_MS})"
    )
    parser.add_argument(
        "--expiration-offset", help=f"e.g. 21d; 0 disables (env {injection.ENV_EXPIRATION_OFFSET})"
    )
    parser.add_argument("--replica", help=f"the Replica's name (env {injection.ENV_REPLICA})")
    parser.add_argument(
        "--conf", action="append", metavar="KEY=VALUE", help="Spark setting (repeatable)"
    )
    parser.add_argument("--tick", help="time between batches (default 1s)")
    parser.add_argument(
        "--reset",
        action="append",
        default=[],
        metavar="NAME",
        help="let dataflow NAME start over on state made for another spec when its desired "
        "entry has no generation (its old output is not retracted); repeatable",
    )
    parser.add_argument(
        "--no-warm-up",
        action="store_true",
        help="say ready without first running a small dataflow to warm Spark up "
        "(the first dataflow then hydrates several times slower)",
    )


def start_serving(config: ReplicaConfig) -> tuple[ControlServer, StartingService]:
    """Serve the control API at once, before Spark starts: liveness does not wait for it.

    The server answers over a :class:`StartingService` until the engine is attached.
    """
    starting = StartingService(
        config.start_time, replica_expiration(config.start_time, config.expiration_offset)
    )
    server = ControlServer(
        starting, config.control_address, labels=config.labels, token=config.control_token
    )
    return server.start(), starting


def execute(
    config: ReplicaConfig,
    spark: SparkSession,
    stop: threading.Event,
    on_serving: Callable[[ControlServer], None] | None = None,
    serving: tuple[ControlServer, StartingService] | None = None,
) -> int:
    """Run the engine behind the control API until ``stop`` is set or the replica expires.

    ``serving``: the server :func:`start_serving` started (its owner stops it); without
    one, serves here and stops serving on return. Returns the exit code; does not stop
    ``spark``.
    """
    from dataflow_operator.runtime.clock import TickPlan
    from dataflow_operator.runtime.engine.config import EngineConfig, expired_message
    from dataflow_operator.runtime.engine.engine import Engine
    from dataflow_operator.runtime.engine.loop import run_plan
    from dataflow_operator.runtime.engine.partitions import state_partitions
    from dataflow_operator.runtime.engine.warm_up import warm_up

    if config.keep_state is not None:
        removed = prune_attempt_states(Location.of(config.state_dir), config.keep_state)
        if removed:
            log.info("earlier attempts' state removed", removed=removed)
    engine = Engine(
        spark,
        EngineConfig(
            state_dir=config.state_dir,
            start_time=config.start_time,
            expiration_offset=config.expiration_offset,
            state_partitions=state_partitions(config.master, config.spark_conf),
            reset=config.reset,
        ),
    )
    expiration = engine.config.expiration
    code = injection.EXIT_FAILED
    server, starting = serving or start_serving(config)
    watching = threading.Event()
    try:
        if config.warm_up and not stop.is_set():
            warm_up(spark, engine.config.state, int(wall.time() * 1000))
        starting.attach(engine)
        log.info(
            "replica ready: Running, /readyz 200; waiting for PUT /dataflows",
            master=config.master,
            state_partitions=engine.config.state_partitions,
        )
        if on_serving is not None:
            on_serving(server)
        plan = TickPlan(start=config.start_time, tick=config.tick_ms, simulated=False)
        code = run_plan(engine, plan, stop=stop, after_batch=_console_progress(engine, watching))
        if stop.is_set() and code != injection.EXIT_EXPIRED:
            code = injection.EXIT_OK  # asked to stop: a graceful end, whatever failed before
    finally:
        watching.set()
        engine.close()
        if serving is None:
            server.stop()
    if code == injection.EXIT_EXPIRED and engine.expired_at is not None and expiration:
        print(expired_message(engine.expired_at, expiration), file=sys.stderr, flush=True)
    log.info("replica stopped", code=code)
    return code


def _console_progress(engine: Engine, stop: threading.Event) -> Callable[[Engine], None] | None:
    """On a terminal: a progress line at most every second and hydration as it moves,
    until ``stop``; elsewhere nothing (the log has no batch events)."""
    if not console_output():
        return None
    progress = BatchProgress(sys.stderr, console=True, interval=CONSOLE_INTERVAL_S)
    watch_hydration(progress, engine.report, stop)
    return lambda engine: progress(engine.report(), engine.now, engine.expired_at is not None)


def _start_spark(master: str, start: Callable[[], SparkSession]) -> SparkSession:
    """Start Spark, told as it starts and once it is up: lines (and a spinner) on a
    terminal, log events elsewhere."""
    if console_output():
        return starting_spark(master, start, sys.stderr, spinner=sys.stderr.isatty())
    log.info("starting Spark", master=master)
    began = wall.monotonic()
    spark = start()
    log.info("Spark is up", master=master, seconds=round(wall.monotonic() - began, 1))
    return spark


def run(args: argparse.Namespace) -> int:
    """Resolve the configuration, serve, start Spark, and run until stopped or expired."""
    configure_logging()
    quiet_repeated_error_logs()
    try:
        config = ReplicaConfig.resolve(args, os.environ)
    except ConfigError as error:
        print(f"replica: {error}", file=sys.stderr)
        return injection.EXIT_USAGE
    unusable = state_dir_problem(config.state_dir, "state location")
    if unusable is not None:
        print(f"replica: {unusable}", file=sys.stderr)
        return injection.EXIT_USAGE
    stop = threading.Event()

    def on_signal(signum: int, _: FrameType | None) -> None:
        log.info("replica stopping", signal=signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    serving = start_serving(config)
    log.info(
        "replica starting",
        start=format_timestamp(config.start_time),
        expiration=None
        if serving[1].expiration is None
        else format_timestamp(serving[1].expiration),
        master=config.master,
        control=serving[0].url,
    )
    try:
        from dataflow_operator.runtime.session import spark_session

        def start() -> SparkSession:
            return spark_session(
                master=config.master,
                app_name=f"dataflow-replica-{config.replica}",
                conf={"spark.ui.showConsoleProgress": "false", **config.spark_conf},
            )

        spark = _start_spark(config.master, start)
        spark.sparkContext.setLogLevel(QUIET_LOG_LEVEL)
        try:
            return execute(config, spark, stop, serving=serving)
        finally:
            spark.stop()
    finally:
        serving[0].stop()
