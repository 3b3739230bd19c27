"""``dataflow-operator class-archive [--output PATH]``: write the driver JVM's class archive.

A child process starts a Spark session whose JVM archives the classes it loaded when it
exits (:mod:`dataflow_operator.runtime.class_archive`), runs the replica's warm-up
dataflow in a scratch folder, and stops. The JVM writes the archive under a temporary
name beside ``PATH``; it is renamed to ``PATH`` only once that JVM has exited cleanly,
so a starting driver never maps half an archive (the JVM would crash on it). ``PATH``
defaults to where drivers look for it: ``$DATAFLOW_CLASS_ARCHIVE``, else the user's
cache folder. Problems are one line on stderr and exit code 1 (2 for usage).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dataflow_operator.api.injection import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from dataflow_operator.logs import configure_logging
from dataflow_operator.runtime.class_archive import ARCHIVE_ENV, OFF, QUIET, archive_path
from dataflow_operator.runtime.engine.warm_up import warm_up
from dataflow_operator.runtime.session import spark_session, stop_driver_jvm
from dataflow_operator.runtime.storage import Location

__all__ = ["configure", "run"]

_PREFIX = "class-archive: "


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``class-archive``."""
    parser.add_argument(
        "--output",
        metavar="PATH",
        help=f"where to write it (default: ${ARCHIVE_ENV}, else the user's cache folder)",
    )
    parser.add_argument("--train", metavar="PATH", help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    """Write the archive (or, with the internal ``--train``, be the child that does)."""
    configure_logging()  # the training run's progress on stderr
    if args.train:
        return _train(Path(args.train))
    target = Path(args.output).expanduser() if args.output else archive_path()
    if target is None:
        print(f"{_PREFIX}{ARCHIVE_ENV} is {OFF!r}: give --output PATH", file=sys.stderr)
        return EXIT_USAGE
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        print(f"{_PREFIX}--output: cannot make {target.parent}: {error}", file=sys.stderr)
        return EXIT_FAILED
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    began = time.monotonic()
    try:
        child = subprocess.run(
            [sys.executable, "-m", "dataflow_operator", "class-archive", "--train", str(partial)],
            env={**os.environ, ARCHIVE_ENV: OFF},  # a dynamic archive is made on the base one
            stdin=subprocess.DEVNULL,
            check=False,
        )
        if child.returncode != EXIT_OK or not partial.is_file():
            print(
                f"{_PREFIX}the training run failed (exit {child.returncode}); "
                f"{target} is unchanged",
                file=sys.stderr,
            )
            return EXIT_FAILED
        try:
            os.replace(partial, target)
        except OSError as error:
            print(f"{_PREFIX}--output: cannot write {target}: {error}", file=sys.stderr)
            return EXIT_FAILED
    finally:
        partial.unlink(missing_ok=True)
    size = target.stat().st_size / 2**20
    print(
        f"{_PREFIX}wrote {target} ({size:.0f} MiB) in {time.monotonic() - began:.0f} s; "
        "Spark's driver maps it from its next start"
    )
    return EXIT_OK


def _train(partial: Path) -> int:
    """The child: a session archiving its classes to ``partial`` at exit, the warm-up."""
    spark = spark_session(
        app_name="dataflow-class-archive",
        conf={
            "spark.driver.extraJavaOptions": f"-XX:ArchiveClassesAtExit={partial} {QUIET}",
            "spark.ui.showConsoleProgress": "false",
        },
    )
    with tempfile.TemporaryDirectory(prefix="class-archive-") as scratch:
        warmed = warm_up(spark, Location.of(scratch), int(time.time() * 1000))
    code = stop_driver_jvm(spark)
    return EXIT_OK if warmed is not None and code == 0 else EXIT_FAILED
