"""``dataflow-operator explain FILE [--name DATAFLOW] [--node-ids]``: print physical plans.

Each dataflow's plan is planned by Spark (local mode) and printed one node per line,
indented by depth; ``--node-ids`` ends each line with ``// { node_id: N }``, the ids the
replica reports hydration for (:mod:`dataflow_operator.runtime.plan`). A dataflow that
fails to plan prints its error on one line and the others still print.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from dataflow_operator.api.catalog import Catalog
from dataflow_operator.api.dataflow import Dataflow, DataflowSpec, Source
from dataflow_operator.api.injection import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from dataflow_operator.api.manifests import load_paths
from dataflow_operator.core.errors import DomainError
from dataflow_operator.core.sql_shape import DIFF, FILTERED, TIME
from dataflow_operator.core.temporal import plan_temporal
from dataflow_operator.runtime.plan import PlanTree, live_plan

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "FrameBuilder",
    "configure",
    "error_line",
    "explain_dataflow",
    "placeholder_frame",
    "run",
]

FrameBuilder = Callable[["SparkSession", str, Catalog], "DataFrame"]
"""Builds the DataFrame a dataflow runs, in a session of its own (its sources as views)."""


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``explain``."""
    parser.add_argument("paths", nargs="+", type=Path, metavar="FILE", help="manifests or dirs")
    parser.add_argument("--name", action="append", default=[], help="only this dataflow")
    parser.add_argument(
        "--node-ids", action="store_true", help="end each line with // { node_id: N }"
    )
    parser.add_argument("--master", default="local[1]", help="Spark master (default local[1])")


def error_line(error: BaseException) -> str:
    """An error as one line, without traceback or JVM stack."""
    text = error.message if isinstance(error, DomainError) else str(error)
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return first or type(error).__name__


def _source_schema(source: Source) -> str:
    given = source.table or source.files or source.changelog or source.kafka
    assert given is not None  # a dataflow source is resolved by the caller
    return given.schema_


def placeholder_frame(session: SparkSession, name: str, catalog: Catalog) -> DataFrame:
    """The dataflow's query over empty relations of its sources' schemas.

    Enough to plan: each source is an empty view with its declared columns plus the
    changelog's time and diff; a ``dataflow`` source is the upstream dataflow's own
    frame. ``mz_now()`` filters are rewritten by :func:`plan_temporal` as the engine does.
    """
    spec: DataflowSpec = catalog.spec(name)
    for source in spec.sources:
        if source.dataflow is not None:
            frame = placeholder_frame(session.newSession(), source.dataflow.name, catalog)
            frame = session.createDataFrame([], frame.schema)
        else:
            schema = f"{_source_schema(source)}, {TIME} BIGINT, {DIFF} BIGINT"
            frame = session.createDataFrame([], schema)
        frame.createOrReplaceTempView(source.name)
    query = plan_temporal(spec.sql, [source.name for source in spec.sources])
    if query.inner_sql is not None and query.outer_sql is not None:
        session.sql(query.inner_sql).createOrReplaceTempView(FILTERED)
        return session.sql(query.outer_sql)
    return session.sql(query.sql)


def explain_dataflow(
    spark: SparkSession, name: str, catalog: Catalog, build: FrameBuilder = placeholder_frame
) -> PlanTree:
    """The numbered physical plan of dataflow ``name`` (planned in a session of its own)."""
    frame = build(spark.newSession(), name, catalog)
    return live_plan(frame._jdf.queryExecution().executedPlan(), metrics=False).tree


def _catalogs(dataflows: Sequence[Dataflow]) -> dict[tuple[str, str], Catalog]:
    scopes: dict[tuple[str, str], dict[str, DataflowSpec]] = defaultdict(dict)
    for dataflow in dataflows:
        scope = (dataflow.metadata.namespace or "default", dataflow.spec.cluster)
        scopes[scope][dataflow.metadata.name] = dataflow.spec
    return {scope: Catalog(specs) for scope, specs in scopes.items()}


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
    from dataflow_operator.runtime.session import spark_session

    spark = spark_session(master=args.master, app_name="dataflow-explain")
    # PySpark logs every analysis error with its JVM stack; the one line below says it.
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
    catalogs = _catalogs(dataflows)
    failed = bool(problems or missing)
    for dataflow in chosen:
        name = dataflow.metadata.name
        catalog = catalogs[(dataflow.metadata.namespace or "default", dataflow.spec.cluster)]
        try:
            tree = explain_dataflow(spark, name, catalog)
        except Exception as error:  # one line per dataflow, the others still print
            print(f"Dataflow/{name}: error: {error_line(error)}")
            failed = True
            continue
        print(f"Dataflow/{name}:")
        for line in tree.render(node_ids=args.node_ids):
            print(f"  {line}")
    sys.stdout.flush()
    return EXIT_FAILED if failed else EXIT_OK
