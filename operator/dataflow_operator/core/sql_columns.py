"""Columns a dataflow's SQL reads, checked offline against its sources' declared schemas.

``run`` learns of an unknown column when Spark analyses the query on a replica; ``check``
learns of it here, without Spark: sqlglot qualifies every column of the query against
the schemas (Spark dialect, names matched case-insensitively, as Spark does). Only a
column that no relation in scope has is reported; whatever sqlglot cannot decide (a
type it does not read, a construct it cannot qualify) is left for Spark, so this check
never refuses a query that Spark accepts.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence

import sqlglot
from sqlglot import exp
from sqlglot.errors import OptimizeError, ParseError, SqlglotError
from sqlglot.optimizer.qualify import qualify

from dataflow_operator.core.ddl import Column
from dataflow_operator.core.errors import InvalidSql
from dataflow_operator.core.sql import DIALECT
from dataflow_operator.core.sql_shape import is_time_window

__all__ = ["unknown_column"]

_UNRESOLVED = re.compile(r"Column '(?P<name>[^']*)' could not be resolved")
_UNKNOWN = re.compile(r"Unknown column: (?P<name>\S+)")
_POSITION = re.compile(r"Line: (?P<line>\d+), Col: (?P<end>\d+)")


def _sqlglot_schema(
    schemas: Mapping[str, Sequence[Column]],
) -> dict[str, object] | None:
    """The schemas as sqlglot takes them; ``None`` when a type is not one it reads."""
    result: dict[str, object] = {}
    for source, columns in schemas.items():
        table: dict[str, str] = {}
        for column in columns:
            try:
                exp.DataType.build(column.type, dialect=DIALECT)
            except (ParseError, SqlglotError, ValueError):
                return None
            table[exp.to_identifier(column.name).sql(dialect=DIALECT)] = column.type
        result[source] = table
    return result


def unknown_column(sql: str, schemas: Mapping[str, Sequence[Column]]) -> InvalidSql | None:
    """The problem of a column ``sql`` reads that none of its sources has, or None.

    ``schemas``: every source the SQL may read, by name, with its declared columns (the
    columns its SQL sees). The problem names the column, where it is in the SQL, the
    closest declared names, and each source's columns.
    """
    schema = _sqlglot_schema(schemas)
    if schema is None:
        return None
    try:
        tree = sqlglot.parse_one(sql, read=DIALECT)
        if any(is_time_window(node) for node in tree.walk()):
            return None  # its window struct column is Spark's, not a source's
        qualify(
            tree,
            schema=schema,
            dialect=DIALECT,
            validate_qualify_columns=True,
            quote_identifiers=False,
            identify=False,
        )
    except OptimizeError as error:
        message = str(error)
        found = _UNRESOLVED.search(message) or _UNKNOWN.search(message)
        if found is None:
            return None
        return InvalidSql(_describe(found["name"], message, schemas), field="spec.sql")
    except Exception:
        return None
    return None


def _describe(name: str, message: str, schemas: Mapping[str, Sequence[Column]]) -> str:
    """``SQL reads column 'x' at line 1, column 8, which no source has; did you mean
    'y'? (events has a, b)``: sqlglot's position is the name's end, the start is said."""
    position = _POSITION.search(message)
    where = ""
    if position is not None:
        start = max(1, int(position["end"]) - len(name) + 1)
        where = f" at line {position['line']}, column {start}"
    declared = sorted({c.name for columns in schemas.values() for c in columns}, key=str.lower)
    lowered = {d.lower(): d for d in declared}
    close = [lowered[m] for m in difflib.get_close_matches(name.lower(), list(lowered), n=3)]
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    listing = "; ".join(
        f"{source} has {', '.join(c.name for c in columns)}" for source, columns in schemas.items()
    )
    return f"SQL reads column {name!r}{where}, which no source has{hint} ({listing})"
