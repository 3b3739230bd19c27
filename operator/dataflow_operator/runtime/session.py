"""Building the Spark session a replica (and every command) runs in.

The one place that starts Spark, so the one place that decides:

- the Python the workers run (``PYSPARK_PYTHON``): this process's own interpreter unless
  the user chose one, so that data sources importing ``dataflow_operator`` work outside
  the project's Makefile;
- Spark's logging: :data:`LOG4J2_CONFIG` is passed to the driver JVM before it starts,
  so Spark's start-up banner never prints;
- the ``SPARK_HOME`` the driver JVM starts with (:mod:`.spark_home`), so that Python
  workers import the installed pyspark rather than compile ``pyspark.zip``;
- the driver JVM's class archive (:mod:`.class_archive`), when there is one;
- the driver JVM's stderr: read through :mod:`dataflow_operator.runtime.jvm_output`,
  which drops the lines no option silences (the JVM's incubator-module warning, the
  Python workers' start-up chatter) and forwards the rest.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path

from pyspark import SparkConf, SparkContext
from pyspark.java_gateway import launch_gateway
from pyspark.sql import SparkSession

from dataflow_operator.runtime.class_archive import archive_options, archive_path
from dataflow_operator.runtime.jvm_output import forward_stderr
from dataflow_operator.runtime.spark_home import driver_spark_home

__all__ = [
    "LOCAL_DEFAULTS",
    "LOG4J2_CONFIG",
    "driver_java_options",
    "spark_session",
    "stop_driver_jvm",
    "with_class_archive",
]

LOCAL_DEFAULTS: dict[str, str] = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    ),
    "spark.sql.streaming.stopTimeout": "30s",
    # A killed task's Python worker (a source reader a drop stopped) is killed this long
    # after the task, instead of 2 s: a dropped dataflow's tasks end sooner.
    "spark.python.task.killTimeout": "200ms",
    # A replica runs for weeks, a batch every tick, a job per recursion step: Spark's
    # status store keeps 1000 of each by default, enough to fill a small driver's heap.
    "spark.ui.retainedJobs": "200",
    "spark.ui.retainedStages": "200",
    "spark.ui.retainedTasks": "20000",
    "spark.sql.ui.retainedExecutions": "50",
    "spark.sql.streaming.ui.retainedQueries": "50",
    # State store versions past the retained batches are deleted by a maintenance task,
    # every minute by default: a tick of a fraction of a second would pile up hundreds.
    "spark.sql.streaming.stateStore.maintenanceInterval": "10s",
}
"""Settings a replica starts with: loopback only, UTC, small shuffles, RocksDB state,
and a status store (jobs, stages, tasks, SQL executions) bounded in size."""

LOG4J2_CONFIG = Path(__file__).with_name("log4j2.properties")
"""The driver's log4j2 configuration (errors only, on stderr), shipped in the package."""

_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
_LOG4J2_PROPERTY = "-Dlog4j2.configurationFile="
_ARCHIVE_FLAGS = ("-XX:SharedArchiveFile=", "-XX:ArchiveClassesAtExit=")
_PYTHON_VARIABLES = ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")
_SPARK_HOME = "SPARK_HOME"
_STDERR = 2  # the descriptor the JVM would have inherited, whatever sys.stderr is now


def driver_java_options(given: str | None) -> str:
    """``spark.driver.extraJavaOptions`` with :data:`LOG4J2_CONFIG` unless one is given."""
    options = (given or "").strip()
    if _LOG4J2_PROPERTY in options:
        return options
    return f"{options} {_LOG4J2_PROPERTY}{LOG4J2_CONFIG.as_uri()}".strip()


def with_class_archive(options: str, env: Mapping[str, str] | None = None) -> str:
    """``options`` and the options that map the class archive (:mod:`.class_archive`)
    when there is one, unless ``options`` name an archive themselves."""
    if any(flag in options for flag in _ARCHIVE_FLAGS):
        return options
    return f"{options} {archive_options(archive_path(env))}".strip()


def _settings(master: str, app_name: str, conf: Mapping[str, str] | None) -> dict[str, str]:
    settings = {**LOCAL_DEFAULTS, **dict(conf or {})}
    options = driver_java_options(settings.get(_JAVA_OPTIONS))
    settings[_JAVA_OPTIONS] = with_class_archive(options)
    return {"spark.master": master, "spark.app.name": app_name, **settings}


def _start_driver_jvm(settings: Mapping[str, str]) -> None:
    """Start the driver JVM (once per process) with its stderr read by a filter thread.

    PySpark would start it with this process's stderr; starting it here first, with the
    same settings on its command line, is the only way to see what the JVM prints.
    """
    if SparkContext._gateway is not None:
        return
    given = os.environ.get(_SPARK_HOME)
    home = driver_spark_home()
    if home is not None:
        os.environ[_SPARK_HOME] = home  # launch_gateway passes os.environ to the JVM
    try:
        gateway = launch_gateway(  # type: ignore[no-untyped-call]
            SparkConf(loadDefaults=False).setAll(list(settings.items())),
            popen_kwargs={"stderr": subprocess.PIPE},
        )
    finally:
        if given is None:
            os.environ.pop(_SPARK_HOME, None)
        else:
            os.environ[_SPARK_HOME] = given
    if gateway.proc is not None:
        threading.Thread(
            target=forward_stderr,
            args=(gateway.proc.stderr, _STDERR),
            name="spark-driver-stderr",
            daemon=True,
        ).start()
    SparkContext._ensure_initialized(gateway=gateway)


def spark_session(
    master: str = "local[2]",
    app_name: str = "dataflow-replica",
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """The replica's Spark session (created once per process, then reused).

    ``conf`` overrides :data:`LOCAL_DEFAULTS`; on Kubernetes the operator passes the
    ``spark.kubernetes.*`` settings this way.
    """
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    for variable in _PYTHON_VARIABLES:
        os.environ.setdefault(variable, sys.executable)
    settings = _settings(master, app_name, conf)
    _start_driver_jvm(settings)
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def stop_driver_jvm(session: SparkSession, timeout: float = 120.0) -> int | None:
    """Stop ``session`` and its driver JVM, and wait for the JVM to exit (it writes a
    class archive it was asked for then); its exit code, ``None`` when it was not this
    process's to stop or did not exit within ``timeout`` seconds."""
    session.stop()
    gateway = SparkContext._gateway
    process = getattr(gateway, "proc", None)
    if gateway is None or process is None:
        return None
    gateway.shutdown()
    if process.stdin is not None:
        process.stdin.close()  # the JVM's gateway exits when its stdin closes
    try:
        code: int = process.wait(timeout)
    except subprocess.TimeoutExpired:
        return None
    SparkContext._gateway = None
    SparkContext._jvm = None
    return code
