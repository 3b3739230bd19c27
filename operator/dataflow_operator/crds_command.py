"""``dataflow-operator crds``: write or check the generated CRDs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dataflow_operator.api.crds import check_files, write_files
from dataflow_operator.api.reference import render_reference

__all__ = ["DEFAULT_DIRECTORIES", "REFERENCE", "configure", "run"]

DEFAULT_DIRECTORIES = [Path("crds"), Path("charts/dataflow-operator/crds")]
REFERENCE = Path("docs/reference.md")


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
    """Write the CRDs (and, by default, the reference page), or with ``--check`` report drift."""
    directories = args.out or DEFAULT_DIRECTORIES
    with_reference = not args.out
    if args.check:
        problems = check_files(directories)
        if with_reference and (
            not REFERENCE.exists() or REFERENCE.read_text() != render_reference()
        ):
            problems.append(f"{REFERENCE}: out of date with dataflow_operator.api; run `make crds`")
        for problem in problems:
            print(problem, file=sys.stderr)
        return 1 if problems else 0
    for path in write_files(directories):
        print(path)
    if with_reference:
        REFERENCE.parent.mkdir(parents=True, exist_ok=True)
        REFERENCE.write_text(render_reference())
        print(REFERENCE)
    return 0
