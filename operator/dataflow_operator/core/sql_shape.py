"""Shared vocabulary of the SQL planners: reserved names and the shapes of a query.

Used by :mod:`dataflow_operator.core.temporal` and :mod:`dataflow_operator.core.incremental`
so that both agree on what a *linear* query is (one that maps each changelog update to
output updates row by row). Pure sqlglot; no Spark.
"""

from __future__ import annotations

from collections.abc import Iterator

from sqlglot import exp

from dataflow_operator.core.changelog import DIFF, TIME
from dataflow_operator.core.sql import DIALECT

__all__ = [
    "DIFF",
    "FILTERED",
    "TIME",
    "TIME_WINDOW_FUNCTIONS",
    "cte_names",
    "from_table",
    "is_linear",
    "is_linear_select",
    "is_mz_now",
    "is_nondeterministic",
    "is_row_wise",
    "is_session_window",
    "is_time_window",
    "leaves",
    "normalized",
    "render",
    "set_from_table",
    "unwrap",
]

TIME_WINDOW_FUNCTIONS = frozenset({"window", "session_window"})
"""Spark's grouping functions that put a row in time windows: grouped by one, a query
reads its ``window`` (``session_window``) struct column, which no source has."""

FILTERED = "__mz_filtered"
"""Relation the outer stage of a staged temporal query reads (see core.temporal)."""

# Spark aggregate functions that sqlglot (30.x) parses as anonymous function calls; the
# ones it knows are subclasses of exp.AggFunc.
_ANONYMOUS_AGGREGATES = frozenset(
    {
        "any",
        "approx_count_distinct",
        "approx_percentile",
        "array_agg",
        "bit_and",
        "bit_or",
        "bit_xor",
        "bitmap_construct_agg",
        "bitmap_or_agg",
        "bool_and",
        "bool_or",
        "collect_list",
        "collect_set",
        "corr",
        "count",
        "count_if",
        "count_min_sketch",
        "covar_pop",
        "covar_samp",
        "every",
        "first",
        "first_value",
        "grouping",
        "grouping_id",
        "histogram_numeric",
        "hll_sketch_agg",
        "hll_union_agg",
        "kurtosis",
        "last",
        "last_value",
        "listagg",
        "max",
        "max_by",
        "mean",
        "median",
        "min",
        "min_by",
        "mode",
        "percentile",
        "percentile_approx",
        "percentile_cont",
        "percentile_disc",
        "regr_avgx",
        "regr_avgy",
        "regr_count",
        "regr_intercept",
        "regr_r2",
        "regr_slope",
        "regr_sxx",
        "regr_sxy",
        "regr_syy",
        "skewness",
        "some",
        "std",
        "stddev",
        "stddev_pop",
        "stddev_samp",
        "string_agg",
        "sum",
        "try_avg",
        "try_sum",
        "var_pop",
        "var_samp",
        "variance",
    }
)


def render(node: exp.Expr) -> str:
    """``node`` as Spark SQL text."""
    return node.sql(dialect=DIALECT)


def is_time_window(node: exp.Expr) -> bool:
    """Whether ``node`` calls one of :data:`TIME_WINDOW_FUNCTIONS`."""
    return isinstance(node, exp.Anonymous) and node.name.lower() in TIME_WINDOW_FUNCTIONS


def is_row_wise(node: exp.Expr) -> bool:
    """Whether ``node`` is an expression of one row alone: no subquery, window function,
    aggregate, nondeterministic call or ``mz_now()`` anywhere in it."""
    return not any(
        isinstance(n, exp.Query | exp.Window | exp.Exists)
        or is_aggregate(n)
        or is_nondeterministic(n)
        or is_mz_now(n)
        for n in node.walk()
    )


def is_session_window(node: exp.Expr) -> bool:
    """Whether ``node`` calls ``session_window`` (whose groups merge as rows arrive)."""
    return is_time_window(node) and node.name.lower() == "session_window"


def is_mz_now(node: exp.Expr) -> bool:
    """Whether ``node`` is a call of ``mz_now`` (any case, any arguments)."""
    return isinstance(node, exp.Anonymous) and str(node.name).lower() == "mz_now"


def is_aggregate(node: exp.Expr) -> bool:
    """Whether ``node`` is an aggregate function call (known to sqlglot or by Spark name)."""
    if isinstance(node, exp.AggFunc):
        return True
    return isinstance(node, exp.Anonymous) and str(node.name).lower() in _ANONYMOUS_AGGREGATES


_NON_DETERMINISTIC = (
    exp.CurrentTimestamp,
    exp.CurrentDate,
    exp.CurrentTime,
    exp.Rand,
    exp.Randn,
    exp.Uuid,
)
_NON_DETERMINISTIC_NAMES = frozenset(
    {
        "now",
        "current_timestamp",
        "current_date",
        "curdate",
        "localtimestamp",
        "rand",
        "random",
        "randn",
        "uuid",
        "shuffle",
        "monotonically_increasing_id",
        "spark_partition_id",
        "input_file_name",
    }
)


def is_nondeterministic(node: exp.Expr) -> bool:
    """Whether ``node`` is a call whose value may change between evaluations (``rand()``)."""
    if isinstance(node, _NON_DETERMINISTIC):
        return True
    return isinstance(node, exp.Anonymous) and str(node.name).lower() in _NON_DETERMINISTIC_NAMES


def normalized(node: exp.Expr) -> exp.Expr:
    """A copy of ``node`` for comparisons: identifiers lower-cased and unquoted.

    Spark resolves names case-insensitively (``spark.sql.caseSensitive`` is false).
    """

    def lower(sub: exp.Expr) -> exp.Expr:
        if isinstance(sub, exp.Identifier):
            return exp.Identifier(this=str(sub.this).lower(), quoted=False)
        return sub

    return node.transform(lower)


def unwrap(query: exp.Query) -> exp.Query:
    """``query`` without redundant outer parentheses: ``((SELECT …))`` is ``SELECT …``."""
    while isinstance(query, exp.Subquery) and not query.alias and isinstance(query.this, exp.Query):
        query = query.this
    query.parent = None
    return query


def leaves(query: exp.Expr) -> Iterator[exp.Select]:
    """The SELECT blocks of a query combined by set operations, left to right.

    Parenthesised branches (``(SELECT …) UNION ALL (SELECT …)``) are unwrapped. A branch
    that is neither a SELECT nor a set operation is not yielded.
    """
    if isinstance(query, exp.SetOperation):
        yield from leaves(query.this)
        yield from leaves(query.expression)
    elif isinstance(query, exp.Subquery):
        yield from leaves(query.this)
    elif isinstance(query, exp.Select):
        yield query


def cte_names(query: exp.Expr) -> frozenset[str]:
    """Lower-cased names of every CTE defined anywhere in ``query``."""
    return frozenset(cte.alias_or_name.lower() for cte in query.find_all(exp.CTE))


def _from_key(select: exp.Select) -> str:
    # sqlglot renamed the key from "from" to "from_"; support both.
    return "from_" if "from_" in exp.Select.arg_types else "from"


def from_table(select: exp.Select, ctes: frozenset[str] = frozenset()) -> exp.Table | None:
    """The relation ``select`` reads when it reads exactly one named relation, else ``None``.

    ``None`` for joins, lateral views, pivots, derived tables, table functions, CTE
    references and queries without FROM.
    """
    if select.args.get("joins") or select.args.get("laterals") or select.args.get("pivots"):
        return None
    source = select.args.get(_from_key(select))
    if not isinstance(source, exp.From):
        return None
    table = source.this
    if not isinstance(table, exp.Table) or not isinstance(table.this, exp.Identifier):
        return None
    if table.args.get("pivots") or table.args.get("joins") or table.args.get("laterals"):
        return None
    if table.name.lower() in ctes:
        return None
    return table


def set_from_table(select: exp.Select, table: exp.Table) -> None:
    """Make ``select`` read ``table`` (replacing its FROM clause)."""
    select.set(_from_key(select), exp.From(this=table))


NOT_AGGREGATE_ARGS = (
    "with_",
    "with",
    "distinct",
    "qualify",
    "windows",
    "order",
    "sort",
    "distribute",
    "cluster",
    "limit",
    "offset",
    "sample",
)
"""SELECT clauses that make a query neither LINEAR nor AGGREGATE."""
_NOT_LINEAR_ARGS = (*NOT_AGGREGATE_ARGS, "group", "having")


def is_linear_select(select: exp.Select, ctes: frozenset[str] = frozenset()) -> bool:
    """Whether ``select`` maps each row of one relation to rows on its own.

    True for ``SELECT … FROM one_relation [WHERE …]`` with no aggregate, window function,
    subquery, DISTINCT, GROUP BY, HAVING, ORDER BY, LIMIT, join or CTE. Such a query can
    be run on a batch of changelog updates with ``__time`` and ``__diff`` passed through.
    """
    if any(select.args.get(key) for key in _NOT_LINEAR_ARGS):
        return False
    if from_table(select, ctes) is None:
        return False
    for node in select.walk():
        if node is select:
            continue
        if isinstance(node, exp.Query | exp.Window | exp.Exists) or is_aggregate(node):
            return False
        if is_nondeterministic(node):
            return False
    return True


def is_linear(query: exp.Expr, ctes: frozenset[str] = frozenset()) -> bool:
    """Whether ``query`` is a linear SELECT, or a UNION ALL of linear SELECTs.

    In a UNION ALL, every branch's select list must either list its columns (``__time``
    and ``__diff`` get appended) or be exactly one star (``*`` or ``t.*``, which carries
    them as its last columns), so that the appended columns line up by position.
    """
    if isinstance(query, exp.Select):
        return is_linear_select(query, ctes)
    if isinstance(query, exp.Subquery):
        return is_linear(query.this, ctes)
    if isinstance(query, exp.Union):
        if query.args.get("distinct") or any(
            query.args.get(k) for k in ("with_", "with", "order", "limit", "offset")
        ):
            return False
        branches = list(leaves(query))
        return all(
            is_linear_select(branch, ctes) and (_only_star(branch) or not branch.is_star)
            for branch in branches
        ) and _set_tree_is_union_all(query)
    return False


def _only_star(select: exp.Select) -> bool:
    if len(select.expressions) != 1:
        return False
    (item,) = select.expressions
    return isinstance(item, exp.Star) or (isinstance(item, exp.Column) and item.is_star)


def _set_tree_is_union_all(query: exp.Expr) -> bool:
    if isinstance(query, exp.Subquery):
        return _set_tree_is_union_all(query.this)
    if isinstance(query, exp.SetOperation):
        if not isinstance(query, exp.Union) or query.args.get("distinct"):
            return False
        if any(query.args.get(k) for k in ("with_", "with", "order", "limit", "offset")):
            return False
        return _set_tree_is_union_all(query.this) and _set_tree_is_union_all(query.expression)
    return isinstance(query, exp.Select)
