"""``dataflow-operator explain FILE [--name DATAFLOW] [--node-ids]``: print physical plans.

Each dataflow is built as the replica's engine builds it (a streaming DataFrame over its
sources' schemas; no data is read), planned by Spark in local mode as a micro-batch, and
printed one node per line, indented by depth; ``--node-ids`` ends each line with
``// { node_id: N }``, the ids the
replica reports hydration for (:mod:`dataflow_operator.runtime.hydration.plan`). A dataflow
maintained by recompute ends with a ``-- maintained by recompute: …`` line saying why. A
dataflow that fails to plan prints its error on one line and the others still print;
when the offline checks (:func:`~dataflow_operator.api.catalog.first_problems`) refuse
every dataflow asked for, their lines are printed without starting Spark.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from dataflow_operator.api.catalog import Catalog, catalogs_by_scope, first_problems, scope_of
from dataflow_operator.api.dataflow import Dataflow, DataflowSpec, Source
from dataflow_operator.api.injection import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from dataflow_operator.api.loading import load_paths
from dataflow_operator.core.plan import PlanTree
from dataflow_operator.runtime.cli.progress import starting_spark
from dataflow_operator.runtime.errors import one_line
from dataflow_operator.runtime.hydration.plan import executed_plan, live_plan

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from dataflow_operator.runtime.strategies.build import BuiltDataflow

__all__ = [
    "FrameBuilder",
    "configure",
    "engine_frame",
    "explain_dataflow",
    "explain_with_reason",
    "run",
]

FrameBuilder = Callable[["SparkSession", str, Catalog], "DataFrame"]
"""Builds the streaming DataFrame the engine runs for a dataflow (sources by schema only)."""


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``explain``."""
    parser.add_argument("paths", nargs="+", type=Path, metavar="FILE", help="manifests or dirs")
    parser.add_argument("--name", action="append", default=[], help="only this dataflow")
    parser.add_argument(
        "--node-ids", action="store_true", help="end each line with // { node_id: N }"
    )
    parser.add_argument("--master", default="local[1]", help="Spark master (default local[1])")


def _source_schema(source: Source) -> str:
    given = source.table or source.files or source.changelog or source.kafka
    assert given is not None  # a dataflow source is resolved by the caller
    return given.schema_


def _built(session: SparkSession, name: str, catalog: Catalog, scratch: str) -> BuiltDataflow:
    from dataflow_operator.runtime.sources.frames import SourceInput
    from dataflow_operator.runtime.strategies.build import build_dataflow

    spec: DataflowSpec = catalog.spec(name)
    for problem in catalog.problems(name):
        raise problem.error
    inputs = []
    for source in spec.sources:
        # Planning reads only the schema; the reader's options matter once a query runs.
        options = {"kind": source.kind.value, "path": scratch, "log_dir": scratch}
        if source.dataflow is not None:
            upstream = _built(session, source.dataflow.name, catalog, scratch)
            inputs.append(SourceInput(source.name, upstream.data_ddl, options))
        else:  # a kafka source too: planning connects to no broker
            inputs.append(SourceInput(source.name, _source_schema(source), options))
    return build_dataflow(session, spec.sql, inputs, None, None)


def engine_frame(session: SparkSession, name: str, catalog: Catalog) -> DataFrame:
    """The streaming DataFrame the replica's engine runs for dataflow ``name``.

    Built by the engine's own builder
    (:func:`dataflow_operator.runtime.strategies.build.build_dataflow`)
    over its sources' schemas, without reading them: the plan, and so the node ids, are
    those a replica reports hydration for.
    """
    with tempfile.TemporaryDirectory(prefix="dataflow-explain-") as scratch:
        return _built(session, name, catalog, scratch).frame


def explain_dataflow(
    spark: SparkSession, name: str, catalog: Catalog, build: FrameBuilder = engine_frame
) -> PlanTree:
    """The numbered physical plan of dataflow ``name``.

    Planned in ``spark`` itself: the engine's builder registers its sources' views under
    a lock and drops them again, and registers its data source once per session. Any
    Spark job it starts runs under a token of its own (``explain-<name>``).
    """
    from dataflow_operator.runtime.token import Token

    with Token(f"explain-{name}").scope(spark, f"explain {name}"):
        frame = build(spark, name, catalog)
        return live_plan(executed_plan(frame), metrics=False).tree


def explain_with_reason(
    spark: SparkSession, name: str, catalog: Catalog
) -> tuple[PlanTree, str | None]:
    """The numbered physical plan of dataflow ``name`` and why it is recomputed at every
    changed time (``None``: incremental), both from the one build the engine makes — so
    a fallback only the build sees (a join that does not resolve) is named too."""
    reasons: list[str | None] = []

    def build(session: SparkSession, flow: str, scope: Catalog) -> DataFrame:
        with tempfile.TemporaryDirectory(prefix="dataflow-explain-") as scratch:
            built = _built(session, flow, scope, scratch)
        reasons.append(built.recompute_reason)
        return built.frame

    tree = explain_dataflow(spark, name, catalog, build)
    return tree, reasons[-1]


def run(args: argparse.Namespace) -> int:
    """Print each dataflow's plan; exit 1 if any failed to plan or load."""
    manifests, problems = load_paths(args.paths)
    for problem in problems:
        print(problem, file=sys.stderr)
    dataflows = [m.resource for m in manifests if isinstance(m.resource, Dataflow)]
    wanted = set(args.name)
    chosen = [d for d in dataflows if not wanted or d.metadata.name in wanted]
    missing = sorted(wanted - {d.metadata.name for d in dataflows})
    for name in missing:
        print(f"Dataflow/{name}: not found in the given files", file=sys.stderr)
    if not chosen:
        return EXIT_USAGE if missing or not problems else EXIT_FAILED
    refusals = first_problems(chosen, among=dataflows)
    if all(refusals):  # nothing to plan: said without starting Spark
        for dataflow, refusal in zip(chosen, refusals, strict=True):
            assert refusal is not None
            print(f"Dataflow/{dataflow.metadata.name}: error: {one_line(refusal.error)}")
        return EXIT_FAILED
    from dataflow_operator.runtime.session import spark_session

    spark = starting_spark(
        args.master,
        lambda: spark_session(master=args.master, app_name="dataflow-explain"),
        sys.stderr,
        spinner=sys.stderr.isatty(),
    )
    # PySpark logs every analysis error with its JVM stack; the one line below says it.
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
    catalogs = catalogs_by_scope(dataflows)
    failed = bool(problems or missing)
    for dataflow in chosen:
        name = dataflow.metadata.name
        catalog = catalogs[scope_of(dataflow)]
        try:
            tree, reason = explain_with_reason(spark, name, catalog)
        except Exception as error:  # one line per dataflow, the others still print
            print(f"Dataflow/{name}: error: {one_line(error)}")
            failed = True
            continue
        print(f"Dataflow/{name}:")
        for line in tree.render(node_ids=args.node_ids):
            print(f"  {line}")
        if reason is not None:
            print(f"  -- maintained by recompute: {reason}")
    sys.stdout.flush()
    return EXIT_FAILED if failed else EXIT_OK
