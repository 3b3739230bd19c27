"""``dataflow-operator crds``: write or check the generated CRDs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dataflow_operator.api.crds import check_files, write_files

__all__ = ["DEFAULT_DIRECTORIES", "configure", "run"]

DEFAULT_DIRECTORIES = [Path("crds"), Path("charts/dataflow-operator/crds")]


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``crds``."""
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if the files on disk differ from the models"
    )
    parser.add_argument(
        "--out",
        action="append",
        type=Path,
        metavar="DIR",
        help="directory to write into (repeatable; default: crds/ and the chart's crds/)",
    )


def run(args: argparse.Namespace) -> int:
    """Write the CRDs, or with ``--check`` report drift."""
    directories = args.out or DEFAULT_DIRECTORIES
    if args.check:
        problems = check_files(directories)
        for problem in problems:
            print(problem, file=sys.stderr)
        return 1 if problems else 0
    for path in write_files(directories):
        print(path)
    return 0
