"""Row values between files, Spark and text: parsing by Spark type, printing for humans.

Pure Python (no JVM): it runs in the Python workers that read sources as well as in
the driver.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from decimal import Decimal
from typing import Any

__all__ = [
    "BadValue",
    "convert",
    "convert_row",
    "format_update",
    "format_value",
    "iter_json_lines",
    "json_objects",
]

_INTEGRAL_BITS = {
    "byte": 8,
    "tinyint": 8,
    "short": 16,
    "smallint": 16,
    "integer": 32,
    "int": 32,
    "long": 64,
    "bigint": 64,
}
_FLOATING = {"float", "double", "real"}


class BadValue(ValueError):
    """A value that cannot be read as its column's type."""


def _type_name(data_type: Any) -> str:
    name = getattr(data_type, "typeName", None)
    return str(name() if callable(name) else data_type).lower()


def _timestamp(value: Any) -> dt.datetime:
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return dt.datetime.fromtimestamp(value / 1000, tz=dt.UTC)
    if isinstance(value, str):
        moment = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)
    raise BadValue(f"expected a timestamp, got {value!r}")


def convert(value: Any, data_type: Any) -> Any:
    """``value`` (from JSON, CSV or Parquet) as the Python value Spark expects for the type."""
    if value is None:
        return None
    name = _type_name(data_type)
    try:
        if name in _INTEGRAL_BITS:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise BadValue(f"expected an integer, got {value!r}")
            number = int(value)
            bound = 2 ** (_INTEGRAL_BITS[name] - 1)
            if not -bound <= number < bound:
                raise BadValue(f"{value!r} is out of range for {name}")
            return number
        if name in _FLOATING:
            return float(value)
        if name.startswith("decimal"):
            return Decimal(str(value))
        if name == "boolean":
            if isinstance(value, str):
                return value.strip().lower() in {"true", "1", "yes"}
            return bool(value)
        if name in {"timestamp", "timestamp_ntz"}:
            return _timestamp(value)
        if name == "date":
            if isinstance(value, dt.datetime):
                return value.date()
            return value if isinstance(value, dt.date) else dt.date.fromisoformat(str(value))
        if name == "string":
            return value if isinstance(value, str) else json.dumps(value, default=str)
    except (TypeError, ValueError) as error:
        raise BadValue(f"cannot read {value!r} as {name}: {error}") from None
    return value


def convert_row(record: Mapping[str, Any], fields: Sequence[tuple[str, Any]]) -> tuple[Any, ...]:
    """The values of ``record`` for ``fields`` (name, Spark type), converted; missing → NULL."""
    lowered = {key.lower(): value for key, value in record.items()}
    values = []
    for name, data_type in fields:
        raw = record[name] if name in record else lowered.get(name.lower())
        try:
            values.append(convert(raw, data_type))
        except BadValue as error:
            raise BadValue(f"column {name}: {error}") from None
    return tuple(values)


def iter_json_lines(lines: Iterable[str], where: str) -> Iterator[dict[str, Any]]:
    """JSON objects, one per line, parsed as the lines come (a file that is one JSON
    array of objects, its first non-blank line starting with ``[``, is read whole)."""
    iterator = iter(lines)
    for number, line in enumerate(iterator, start=1):
        if not line.strip():
            continue
        if line.lstrip().startswith("["):
            yield from _json_array("".join([line, *iterator]), where)
        else:
            yield _json_object(line, where, number)
            yield from json_objects(iterator, where, first_line=number + 1)
        return


def json_objects(
    lines: Iterable[str], where: str, *, first_line: int = 1
) -> Iterator[dict[str, Any]]:
    """JSON objects, one per non-blank line, parsed as the lines come; an error names
    ``where`` and the line's number (the first of ``lines`` is ``first_line``)."""
    for number, line in enumerate(lines, start=first_line):
        if line.strip():
            yield _json_object(line, where, number)


def _json_object(line: str, where: str, number: int) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as error:
        raise BadValue(f"{where}: line {number}: not JSON: {error.msg}") from None
    if not isinstance(record, dict):
        raise BadValue(f"{where}: line {number}: expected a JSON object")
    return record


def _json_array(text: str, where: str) -> list[dict[str, Any]]:
    try:
        loaded = json.loads(text)
    except json.JSONDecodeError as error:
        raise BadValue(f"{where}: not JSON: {error.msg}") from None
    if not isinstance(loaded, list) or not all(isinstance(r, dict) for r in loaded):
        raise BadValue(f"{where}: expected a JSON array of objects")
    return loaded


def format_value(value: Any) -> str:
    """A value as Subscribe prints it: timestamps in RFC 3339 UTC, NULL as ``NULL``."""
    if value is None:
        return "NULL"
    if isinstance(value, dt.datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        text = moment.astimezone(dt.UTC).isoformat(timespec="milliseconds")
        return text.replace("+00:00", "Z")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(value)
    return str(value)


def format_update(time: int, diff: int, values: Sequence[object]) -> str:
    """One changelog line as ``run`` and the subscribe stream print it:
    ``TIME<TAB>DIFF<TAB>col1<TAB>col2…``."""
    return "\t".join([str(time), str(diff), *(format_value(v) for v in values)])
