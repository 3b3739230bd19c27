"""Fuses in a batch query's plan: stages after its joins that end the task once cancelled.

:func:`fused` walks a query's optimized logical plan, asks
:func:`dataflow_operator.core.fuse.join_fuses` where each join needs a fuse, puts one
there, and returns the query built on that plan. A fuse is three plan nodes:

- ``Project [input columns, CASE WHEN <check> THEN true ELSE raise_error(..) END AS __fuse]``
- ``Filter __fuse``
- ``Project [input columns]``

with ``<check>`` = ``(monotonically_increasing_id() & (PERIOD - 1)) <> 0 OR
reflect('java.lang.Thread', 'interrupted') = 'false'``: one row in :data:`PERIOD` asks
whether the task's thread was interrupted, which is what the executor does to a task of
a job cancelled with interrupt-on-cancel (every job a :class:`~.token.Token` scopes), on
whatever executor it runs; a SQL expression can call static Java methods only, and this
is the one such signal of a cancelled task. The first row past the interruption fails
the task, which ends the join loop that was feeding the fuse; the executor reports a
killed task's failure as killed, not as an error.

Why a projected column rather than a filter condition: the optimizer lifts filters that
stand between inner joins above all of them (join reordering), and rewrites boolean
conditions so that ``raise_error`` may be evaluated first; a projection of a
nondeterministic column is a barrier neither crosses. Per row, a fuse costs a counter,
a mask and two comparisons in generated code.

The new plan is analysed and optimized again (the optimizer leaves the joins it already
placed where they are). If that fails, the query runs unfused and a warning says why:
losing the fuse slows a cancel, failing the query would stop the dataflow.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame

from dataflow_operator.core.fuse import join_fuses
from dataflow_operator.logs import get_logger

__all__ = ["FUSE_COLUMN", "PERIOD", "fused"]

log = get_logger(__name__)

FUSE_COLUMN = "__fuse"
"""The column a fuse's projection adds and its filter reads."""

PERIOD = 1024
"""A fuse checks its task's interruption once every this many rows (a power of two)."""

DROPPED_MESSAGE = "task interrupted: its job was cancelled (a fuse stopped the join)"

_CHECK = (
    f"CASE WHEN (monotonically_increasing_id() & {PERIOD - 1}) <> 0"
    " OR reflect('java.lang.Thread', 'interrupted') = 'false'"
    f" THEN true ELSE raise_error('{DROPPED_MESSAGE}') END AS {FUSE_COLUMN}"
)


def fused(frame: DataFrame) -> DataFrame:
    """``frame`` with a fuse wherever one of its joins needs one (``frame`` itself when
    none does, or when the fused plan could not be analysed)."""
    session = frame.sparkSession
    jsession: Any = session._jsparkSession
    jdf: Any = frame._jdf
    jvm: Any = session._jvm
    plan, fuses = _Fuser(jvm, jsession).visit(jdf.queryExecution().optimizedPlan())
    if not fuses:
        return frame
    try:
        fused_jdf = jvm.org.apache.spark.sql.classic.Dataset.ofRows(jsession, plan)
    except Exception as error:
        log.warning("query runs without fuses", error=" ".join(str(error).split())[:300])
        return frame
    return DataFrame(fused_jdf, session)


class _Fuser:
    """Rebuilds a JVM logical plan with fuses, counting them."""

    def __init__(self, jvm: Any, jsession: Any) -> None:
        self._parser = jsession.sessionState().sqlParser()
        self._logical = jvm.org.apache.spark.sql.catalyst.plans.logical
        self._equi_keys = jvm.org.apache.spark.sql.catalyst.planning.ExtractEquiJoinKeys
        self._converters = jvm.scala.jdk.javaapi.CollectionConverters

    def visit(self, plan: Any) -> tuple[Any, int]:
        """``plan`` with its fuses (the same object when it needs none), and their count."""
        children = plan.children()
        rebuilt = []
        fuses = 0
        for index in range(children.size()):
            child, count = self.visit(children.apply(index))
            rebuilt.append(child)
            fuses += count
        where = None
        if str(plan.nodeName()) == "Join":
            equality = bool(self._equi_keys.unapply(plan).isDefined())
            where = join_fuses(str(plan.joinType().toString()), equality)
        if where is not None and where.inputs:
            rebuilt = [self._fuse(child) for child in rebuilt]
            fuses += len(rebuilt)
        if fuses:
            plan = plan.withNewChildren(self._seq(rebuilt))
        if where is not None and where.output:
            plan = self._fuse(plan)
            fuses += 1
        return plan, fuses

    def _fuse(self, plan: Any) -> Any:
        output = plan.output()
        columns = [output.apply(i) for i in range(output.size())]
        check = self._parser.parseExpression(_CHECK)
        with_check = self._logical.Project(self._seq([*columns, check]), plan)
        kept = self._logical.Filter(self._parser.parseExpression(FUSE_COLUMN), with_check)
        return self._logical.Project(self._seq(columns), kept)

    def _seq(self, items: list[Any]) -> Any:
        return self._converters.asScala(items).toSeq()
