"""``dataflow-operator crds``: write or check the generated CRDs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dataflow_operator.api.crds import check_files, write_files
from dataflow_operator.api.protocol_doc import render_control_api
from dataflow_operator.api.reference import render_reference

__all__ = ["CONTROL_API", "DEFAULT_DIRECTORIES", "REFERENCE", "configure", "pages", "run"]

DEFAULT_DIRECTORIES = [Path("crds"), Path("charts/dataflow-operator/crds")]
REFERENCE = Path("docs/reference.md")
CONTROL_API = Path("docs/control-api.md")


def pages() -> dict[Path, str]:
    """The generated documentation pages and their text."""
    return {REFERENCE: render_reference(), CONTROL_API: render_control_api()}


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
    """Write the CRDs (and, by default, the generated pages), or with ``--check`` report drift."""
    directories = args.out or DEFAULT_DIRECTORIES
    with_reference = not args.out
    if args.check:
        problems = check_files(directories)
        for page, text in pages().items() if with_reference else ():
            if not page.exists() or page.read_text() != text:
                problems.append(f"{page}: out of date with dataflow_operator.api; run `make crds`")
        for problem in problems:
            print(problem, file=sys.stderr)
        return 1 if problems else 0
    for path in write_files(directories):
        print(path)
    for page, text in pages().items() if with_reference else ():
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(text)
        print(page)
    return 0
