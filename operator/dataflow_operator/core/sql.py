"""Static checks of a dataflow's SQL, with a real SQL parser (sqlglot, Spark dialect).

This module answers "is this SQL acceptable, and what does it read?" without Spark.
The temporal-filter analysis of ``mz_now()`` lives in :mod:`dataflow_operator.core.temporal`.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from dataflow_operator.core.errors import InvalidSql, UnknownSource
from dataflow_operator.core.sql_dialect import SparkSql

__all__ = ["ParsedSql", "parse_sql"]

DIALECT = SparkSql
"""The dialect every SQL text is parsed and rendered in."""


@dataclass(frozen=True, slots=True)
class ParsedSql:
    """A parsed single-statement query and the relation names it reads."""

    tree: exp.Query
    relations: frozenset[str]


def _referenced_relations(tree: exp.Query) -> frozenset[str]:
    cte_names = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    return frozenset(
        table.name.lower()
        for table in tree.find_all(exp.Table)
        if table.name and table.name.lower() not in cte_names
    )


def parse_sql(sql: str, source_names: Collection[str]) -> ParsedSql:
    """Parse ``sql``; every relation it reads must be one of ``source_names``.

    Raises :class:`InvalidSql` when it does not parse or is not one query, and
    :class:`UnknownSource` when it reads a relation that is not a declared source.
    """
    try:
        statements = [s for s in sqlglot.parse(sql, read=DIALECT) if s is not None]
    except (ParseError, TokenError) as error:
        detail = str(error).splitlines()[0]
        if isinstance(error, ParseError) and error.errors:
            first = error.errors[0]
            detail = f"{first['description']} at line {first['line']}, column {first['col']}"
        raise InvalidSql(f"SQL does not parse: {detail}", field="spec.sql") from None
    if len(statements) != 1:
        raise InvalidSql(
            f"SQL must be exactly one query, found {len(statements)} statements", field="spec.sql"
        )
    (tree,) = statements
    if not isinstance(tree, exp.Query):
        raise InvalidSql(
            f"SQL must be a query (SELECT …), not {tree.key.upper()}", field="spec.sql"
        )
    relations = _referenced_relations(tree)
    known = {name.lower() for name in source_names}
    unknown = sorted(relations - known)
    if unknown:
        declared = ", ".join(sorted(source_names)) or "none"
        raise UnknownSource(
            f"SQL reads {', '.join(repr(u) for u in unknown)}, which "
            f"{'is' if len(unknown) == 1 else 'are'} not a declared source "
            f"(declared: {declared})",
            field="spec.sql",
        )
    return ParsedSql(tree=tree, relations=relations)
