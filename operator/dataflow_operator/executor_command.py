"""``dataflow-operator executor``: start a Spark executor in a pod Spark created.

Spark on Kubernetes creates each executor container from the replica's image with no
``command`` and ``args: [executor]``, so the image's entry point (``dataflow-operator``)
runs this subcommand. It does what the ``executor`` branch of Spark's own image
entry point (``kubernetes/dockerfiles/spark/entrypoint.sh``) does: it replaces itself
(``exec``, so the JVM receives the pod's signals) with

    $JAVA_HOME/bin/java $SPARK_JAVA_OPT_0 … -Xms$SPARK_EXECUTOR_MEMORY
        -Xmx$SPARK_EXECUTOR_MEMORY -cp CLASSPATH
        org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend
        --driver-url $SPARK_DRIVER_URL --executor-id $SPARK_EXECUTOR_ID
        --cores $SPARK_EXECUTOR_CORES --app-id $SPARK_APPLICATION_ID
        --hostname $SPARK_EXECUTOR_POD_IP --resourceProfileId $SPARK_RESOURCE_PROFILE_ID
        --podName $SPARK_EXECUTOR_POD_NAME

with every variable set by Spark on the executor container. The class path is
``$SPARK_CONF_DIR`` (else ``$SPARK_HOME/conf``), ``$HADOOP_CONF_DIR`` if set,
``$SPARK_CLASSPATH``, the Spark home's ``jars/*``, ``$SPARK_EXTRA_CLASSPATH``, the
working directory and ``$SPARK_DIST_CLASSPATH``, in Spark's order. The Spark home is
``$SPARK_HOME``, else the installed ``pyspark`` package (which holds Spark's jars); it is
not exported, so the executor's Python workers import the installed pyspark. Java is
``$JAVA_HOME/bin/java``, else ``java`` on ``PATH``. The ``SPARK_JAVA_OPT_<n>`` options
come in the order of ``n``. The environment passes to the JVM unchanged.

A missing variable is one line naming it, and exit code 2: the container was not
started by Spark.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "EXECUTOR_BACKEND",
    "REQUIRED",
    "configure",
    "executor_command",
    "run",
    "spark_home",
]

EXECUTOR_BACKEND = "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend"
"""The executor's main class on Kubernetes (Spark 3.4 and later)."""
REQUIRED = (
    "SPARK_DRIVER_URL",
    "SPARK_EXECUTOR_ID",
    "SPARK_EXECUTOR_CORES",
    "SPARK_APPLICATION_ID",
    "SPARK_EXECUTOR_POD_IP",
    "SPARK_EXECUTOR_MEMORY",
)
"""Variables Spark always sets on an executor container."""
_JAVA_OPT = re.compile(r"^SPARK_JAVA_OPT_(\d+)$")
EXIT_NOT_AN_EXECUTOR = 2


def configure(parser: argparse.ArgumentParser) -> None:
    """``executor`` takes no arguments: Spark passes everything as environment."""


def spark_home(environ: Mapping[str, str]) -> Path:
    """``$SPARK_HOME``, else the installed pyspark package (its ``jars/`` is Spark's)."""
    given = environ.get("SPARK_HOME")
    if given:
        return Path(given)
    found = importlib.util.find_spec("pyspark")
    if found is None or found.origin is None:
        raise LookupError("neither SPARK_HOME nor an installed pyspark gives Spark's jars")
    return Path(found.origin).resolve().parent


def _java(environ: Mapping[str, str]) -> str:
    home = environ.get("JAVA_HOME")
    if home:
        return str(Path(home, "bin", "java"))
    return shutil.which("java", path=environ.get("PATH")) or "java"


def _java_options(environ: Mapping[str, str]) -> list[str]:
    numbered = [(int(m[1]), value) for key, value in environ.items() if (m := _JAVA_OPT.match(key))]
    return [value for _, value in sorted(numbered)]


def _class_path(environ: Mapping[str, str], home: Path, cwd: str) -> str:
    parts = [environ.get("SPARK_CLASSPATH", ""), str(home / "jars" / "*")]
    if environ.get("SPARK_EXTRA_CLASSPATH"):
        parts.append(environ["SPARK_EXTRA_CLASSPATH"])
    if "HADOOP_CONF_DIR" in environ:
        parts.insert(0, environ["HADOOP_CONF_DIR"])
    parts.insert(0, environ.get("SPARK_CONF_DIR") or str(home / "conf"))
    parts += [cwd, environ.get("SPARK_DIST_CLASSPATH", "")]
    return ":".join(p for p in parts if p)


def executor_command(environ: Mapping[str, str], cwd: str) -> list[str]:
    """The executor JVM's command line, from the container's environment.

    Raises :class:`KeyError` naming the first variable of :data:`REQUIRED` not set.
    """
    for name in REQUIRED:
        if not environ.get(name):
            raise KeyError(name)
    memory = environ["SPARK_EXECUTOR_MEMORY"]
    command = [
        _java(environ),
        *_java_options(environ),
        f"-Xms{memory}",
        f"-Xmx{memory}",
        "-cp",
        _class_path(environ, spark_home(environ), cwd),
        EXECUTOR_BACKEND,
        "--driver-url",
        environ["SPARK_DRIVER_URL"],
        "--executor-id",
        environ["SPARK_EXECUTOR_ID"],
        "--cores",
        environ["SPARK_EXECUTOR_CORES"],
        "--app-id",
        environ["SPARK_APPLICATION_ID"],
        "--hostname",
        environ["SPARK_EXECUTOR_POD_IP"],
        "--resourceProfileId",
        environ.get("SPARK_RESOURCE_PROFILE_ID") or "0",
    ]
    if environ.get("SPARK_EXECUTOR_POD_NAME"):
        command += ["--podName", environ["SPARK_EXECUTOR_POD_NAME"]]
    return command


def run(args: argparse.Namespace) -> int:
    """Replace this process with the executor JVM; returns only on a bad environment."""
    environ = dict(os.environ)
    try:
        command = executor_command(environ, os.getcwd())
    except KeyError as missing:
        print(
            f"dataflow-operator executor: {missing.args[0]} is not set; this entry point "
            "runs in executor pods that Spark creates (spark.master k8s://…)",
            file=sys.stderr,
        )
        return EXIT_NOT_AN_EXECUTOR
    except LookupError as error:
        print(f"dataflow-operator executor: {error}", file=sys.stderr)
        return EXIT_NOT_AN_EXECUTOR
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(command[0], command, environ)
