"""A batch of Kafka JSON values parsed at once by Arrow, where that reads them exactly as
the value-by-value parsing (:func:`~.kafka.record_values`) does.

The values are joined into JSON lines and read with an explicit schema, as a JSON file's
chunk is (:mod:`.json_format`, whose rules this follows): only when every column's Spark
type is one Arrow parses as the row-by-row reading converts it (:data:`~.json_format.PARSED`),
every value is one non-empty line of UTF-8, Arrow parses every value (an object whose
fields have their columns' types) and no field differs from a column's name only by case.
Otherwise ``None``: the caller parses value by value, which also names the record a bad
value is in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.json as pa_json

from dataflow_operator.runtime.sources.exact_arrow import exact_cast, exact_names
from dataflow_operator.runtime.sources.json_format import PARSED, objects_a_line

__all__ = ["arrow_values"]


def arrow_values(
    fields: Sequence[tuple[str, Any]], values: Sequence[bytes | None], data_format: str
) -> pa.Table | None:
    """The values as a table of the source's columns (their Spark types' Arrow types, a
    missing field null), one row per value in order; ``None`` where Arrow would not read
    them exactly (see the module docstring)."""
    from pyspark.sql.pandas.types import to_arrow_type

    if data_format != "json" or not values:
        return None
    wanted: dict[str, pa.DataType] = {}
    for name, spark_type in fields:
        parsed = PARSED.get(spark_type.typeName())
        if parsed is None:
            return None
        wanted[name] = parsed
    lines = [value.strip() if value else b"" for value in values]
    if not all(lines):
        return None  # an empty value is a row of nulls value by value; Arrow skips it
    buffer = b"\n".join(lines)
    if objects_a_line(buffer) != len(lines):
        return None  # a value that is not one object on one line
    try:
        buffer.decode("utf-8")  # Arrow takes bytes that are not UTF-8 into strings unchecked
    except UnicodeDecodeError:
        return None
    read = pa_json.ReadOptions(use_threads=False, block_size=len(buffer) + 1)
    parse = pa_json.ParseOptions(
        explicit_schema=pa.schema(list(wanted.items())), unexpected_field_behavior="infer"
    )
    try:
        table = pa_json.read_json(pa.py_buffer(buffer), read_options=read, parse_options=parse)
    except pa.ArrowException:
        return None
    names = exact_names(table.schema, list(wanted), exact_only=True)
    if table.num_rows != len(lines) or names is None:  # a line of two objects
        return None
    columns: dict[str, pa.Array] = {}
    for name, spark_type in fields:
        arrow = to_arrow_type(spark_type, timezone="UTC")
        found = names.get(name)
        if found is None:
            columns[name] = pa.nulls(table.num_rows, arrow)
            continue
        exact = exact_cast(table.column(found).combine_chunks(), arrow)
        if exact is None:
            return None
        columns[name] = exact
    return pa.table(columns)
