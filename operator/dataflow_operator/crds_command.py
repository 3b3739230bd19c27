"""``dataflow-operator crds``: write or check the generated CRDs and reference pages."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from dataflow_operator.api.crds import check_files, write_files
from dataflow_operator.api.environment_page import render_environment
from dataflow_operator.api.protocol_doc import render_control_api
from dataflow_operator.api.reference import render_reference

__all__ = [
    "CONTROL_API",
    "DEFAULT_DIRECTORIES",
    "ENVIRONMENT",
    "PAGES",
    "REFERENCE",
    "configure",
    "run",
]

DEFAULT_DIRECTORIES = [Path("crds"), Path("charts/dataflow-operator/crds")]
REFERENCE = Path("docs/reference.md")
ENVIRONMENT = Path("docs/replica-environment.md")
CONTROL_API = Path("docs/control-api.md")
PAGES: dict[Path, Callable[[], str]] = {
    REFERENCE: render_reference,
    ENVIRONMENT: render_environment,
    CONTROL_API: render_control_api,
}
"""The docs pages generated from ``dataflow_operator.api``, each with its renderer."""


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
    pages = {} if args.out else PAGES
    if args.check:
        problems = check_files(directories)
        problems += [
            f"{page}: out of date with dataflow_operator.api; run `make crds`"
            for page, render in pages.items()
            if not page.exists() or page.read_text() != render()
        ]
        for problem in problems:
            print(problem, file=sys.stderr)
        return 1 if problems else 0
    for path in write_files(directories):
        print(path)
    for page, render in pages.items():
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(render())
        print(page)
    return 0
