"""Fuses in a batch query's plan: stages after its joins that end the task once cancelled.

:func:`fused` walks a query's optimized logical plan, asks
:func:`dataflow_operator.core.fuse.join_fuses` where each join needs a fuse, puts one
there, and returns the query built on that plan. A fuse is three plan nodes:

- ``Project [input columns, <check> AS __fuse]``
- ``Filter __fuse``
- ``Project [input columns]``

with ``<check>`` = ``(monotonically_increasing_id() & (PERIOD - 1)) <> 0 OR
java.util.Objects.checkIndex(IF(java.lang.Thread.interrupted(), 1, 0), 1) = 0``: one row
in :data:`PERIOD` asks whether the task's thread was interrupted, which is what the
executor does to a task of a job cancelled with interrupt-on-cancel (every job a
:class:`~dataflow_operator.runtime.token.Token` scopes), on whatever executor it runs.
The first row past the interruption fails the task (``checkIndex(1, 1)`` throws), which
ends the join loop that was feeding the fuse; the executor reports a killed task's
failure as killed, not as an error. Both calls are ``StaticInvoke`` expressions,
compiled into the generated code: the same check written in SQL (``reflect``,
``raise_error``) made a cross join's count five times slower even though it runs once in
1024 rows.

Why a projected column rather than a filter condition: the optimizer lifts filters that
stand between inner joins above all of them (join reordering) and rewrites boolean
conditions; a projection of a nondeterministic column is a barrier neither crosses (it
may be folded into an aggregate's output just below, which evaluates it the same way).

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

_DUE = f"(monotonically_increasing_id() & {PERIOD - 1}) <> 0"


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
        self._jvm = jvm
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
        with_check = self._logical.Project(self._seq([*columns, self._check()]), plan)
        kept = self._logical.Filter(self._parser.parseExpression(FUSE_COLUMN), with_check)
        return self._logical.Project(self._seq(columns), kept)

    def _check(self) -> Any:
        """``<due> OR Objects.checkIndex(IF(Thread.interrupted(), 1, 0), 1) = 0 AS __fuse``."""
        jvm = self._jvm
        expressions = jvm.org.apache.spark.sql.catalyst.expressions
        one, zero = self._parser.parseExpression("1"), self._parser.parseExpression("0")
        interrupted = self._static("java.lang.Thread", "interrupted", "BooleanType", [])
        fail = self._static(
            "java.util.Objects",
            "checkIndex",
            "IntegerType",
            [expressions.If(interrupted, one, zero), one],
        )
        check = expressions.Or(self._parser.parseExpression(_DUE), expressions.EqualTo(fail, zero))
        alias = self._parser.parseExpression(f"{FUSE_COLUMN} AS {FUSE_COLUMN}")
        return alias.withNewChildren(self._seq([check]))

    def _static(self, owner: str, method: str, returns: str, arguments: list[Any]) -> Any:
        """A call of a static Java method, compiled into the generated code; never folded
        (nondeterministic), never null."""
        jvm = self._jvm
        return jvm.org.apache.spark.sql.catalyst.expressions.objects.StaticInvoke(
            jvm.java.lang.Class.forName(owner),
            getattr(jvm.org.apache.spark.sql.types.DataTypes, returns),
            method,
            self._seq(arguments),
            self._seq([]),
            False,  # propagateNull
            False,  # returnNullable
            False,  # isDeterministic
            jvm.scala.Option.empty(),
        )

    def _seq(self, items: list[Any]) -> Any:
        return self._converters.asScala(items).toSeq()
