"""The ``dataflow-operator`` command line.

Each subcommand lives in its own module exposing ``configure(parser)`` and
``run(args) -> int``; modules are imported only when their subcommand runs, so that
``crds`` and ``check`` start without loading Spark or kopf.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from dataflow_operator import __version__

__all__ = ["COMMANDS", "main"]

COMMANDS: dict[str, tuple[str, str]] = {
    "crds": ("dataflow_operator.crds_command", "write (or --check) the generated CRDs"),
    "check": ("dataflow_operator.check", "validate manifests offline"),
    "operator": ("dataflow_operator.controller.command", "run the Kubernetes operator (kopf)"),
    "explain": ("dataflow_operator.runtime.cli.explain", "print dataflow plans (--node-ids)"),
    "run": ("dataflow_operator.runtime.cli.run", "run a local replica over manifests"),
    "insert": ("dataflow_operator.runtime.cli.insert", "append rows to a table, atomically"),
    "class-archive": (
        "dataflow_operator.runtime.cli.class_archive",
        "write the class archive that starts Spark's driver faster",
    ),
    "replica": ("dataflow_operator.runtime.cli.replica", "driver pod: engine + control API"),
    "executor": ("dataflow_operator.executor_command", "executor pod: Spark's executor JVM"),
    "subscribe": ("dataflow_operator.client.subscribe_command", "stream a dataflow's changelog"),
    "peek": ("dataflow_operator.client.peek_command", "print an Index's current contents"),
}
"""Subcommand → (module, one-line help)."""

EXIT_USAGE = 2


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line and run the subcommand; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("command", nargs="?")
    known, _ = parser.parse_known_args(argv[:1])
    full = argparse.ArgumentParser(
        prog="dataflow-operator",
        description="Maintain Spark SQL dataflows on Spark replicas, on Kubernetes or locally.",
    )
    full.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = full.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (module, help_text) in COMMANDS.items():
        sub = commands.add_parser(name, help=help_text, description=help_text)
        if name == known.command:
            importlib.import_module(module).configure(sub)
    args = full.parse_args(argv)
    command = importlib.import_module(COMMANDS[args.command][0])
    try:
        code: int = command.run(args)
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
