"""Python rows as a Spark table the driver holds (a ``LocalRelation``), for the oracles.

``spark.createDataFrame(rows)`` makes a table of a Python RDD: every query that reads it
starts Python workers to turn the pickled rows back into Spark's, which made each of the
differential harness's oracle queries cost about a quarter of a second. The rows written
as SQL literals (``VALUES``) are a table the JVM holds: a query over it runs in the JVM
alone. The values are the same: each literal is cast to its column's type.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession

__all__ = ["local_frame", "schema_columns"]


def _literal(value: Any) -> str:
    """``value`` as a Spark SQL literal; a string is its UTF-8 bytes in hex (no quoting)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "CAST('NaN' AS DOUBLE)"
        if math.isinf(value):
            return f"CAST('{'-' if value < 0 else ''}Infinity' AS DOUBLE)"
        return f"CAST('{value!r}' AS DOUBLE)"
    if isinstance(value, str):
        return f"CAST(X'{value.encode().hex()}' AS STRING)"
    raise TypeError(f"no SQL literal for a {type(value).__name__}: {value!r}")


def schema_columns(schema: str) -> list[tuple[str, str]]:
    """A schema of the tests' form (``"k INT, s STRING"``: no nested commas) as its
    columns' names and types, in order."""
    return [(name, kind) for name, kind in (column.split() for column in schema.split(", "))]


def local_frame(spark: SparkSession, schema: str, rows: Sequence[Sequence[Any]]) -> DataFrame:
    """``rows`` as a table of ``schema`` (``"k INT, s STRING"``) held by the driver."""
    columns = schema_columns(schema)
    typed = ", ".join(f"CAST(c{i} AS {kind}) AS {name}" for i, (name, kind) in enumerate(columns))
    if not rows:
        nulls = ", ".join(f"NULL AS c{i}" for i in range(len(columns)))
        return spark.sql(f"SELECT {typed} FROM (SELECT {nulls}) WHERE false")
    values = ", ".join("(" + ", ".join(_literal(v) for v in row) + ")" for row in rows)
    names = ", ".join(f"c{i}" for i in range(len(columns)))
    return spark.sql(f"SELECT {typed} FROM VALUES {values} AS rows({names})")
