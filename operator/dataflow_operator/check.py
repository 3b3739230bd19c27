"""``dataflow-operator check``: validate manifests offline, one line per problem."""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from dataflow_operator.api.catalog import Catalog, scope_of
from dataflow_operator.api.dataflow import Dataflow, DataflowSpec
from dataflow_operator.api.loading import Manifest, Problem, defined_again, load_paths
from dataflow_operator.api.replica import Replica
from dataflow_operator.api.replica_rules import replica_problems

__all__ = ["check_manifests", "configure", "run"]


def check_manifests(
    manifests: Sequence[Manifest], context: Sequence[Manifest] = ()
) -> list[Problem]:
    """Problems across a set of parsed manifests: references, cycles, timelines, SQL,
    and each Replica's rules (:func:`~dataflow_operator.api.replica_rules.replica_problems`).

    ``context`` holds objects that already exist (they resolve references) and whose own
    problems are not reported.
    """
    again = defined_again(manifests)
    problems = list(again.values())
    scopes: dict[tuple[str, str], dict[str, DataflowSpec]] = defaultdict(dict)
    for manifest in [*context, *manifests]:
        if isinstance(manifest.resource, Dataflow):
            scopes[scope_of(manifest.resource)][manifest.resource.metadata.name] = (
                manifest.resource.spec
            )
    for position, manifest in enumerate(manifests):
        resource = manifest.resource
        if position in again:
            continue
        if isinstance(resource, Dataflow):
            catalog = Catalog(scopes[scope_of(resource)])
            problems.extend(
                Problem(manifest.file, manifest.label, problem.field, problem.error.message)
                for problem in catalog.problems(resource.metadata.name)
            )
        elif isinstance(resource, Replica):
            problems.extend(
                Problem(manifest.file, manifest.label, problem.field, problem.message)
                for problem in replica_problems(resource.spec)
            )
    return problems


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``check``."""
    parser.add_argument(
        "paths", nargs="+", type=Path, metavar="FILE", help="manifests or directories"
    )
    parser.add_argument(
        "--context",
        action="append",
        type=Path,
        default=[],
        metavar="FILE",
        help="manifests of objects already applied: they resolve references, "
        "their own problems are not reported (repeatable)",
    )


def run(args: argparse.Namespace) -> int:
    """Print one line per problem; exit 1 if there is any."""
    manifests, problems = load_paths(args.paths)
    context, _ = load_paths(args.context)
    problems.extend(check_manifests(manifests, context))
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} problem(s) in {len(args.paths)} path(s)", file=sys.stderr)
        return 1
    print(f"ok: {len(manifests)} object(s)", file=sys.stderr)
    return 0
