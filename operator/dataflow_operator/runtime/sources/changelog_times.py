"""A changelog row's time and diff, and a changelog file's newest time.

The driver reads every new changelog file's newest time before a batch, to hold back
input at or past the expiration (:meth:`.reader.ChangelogReader.latestOffset`); the
tasks read each row's time and diff. Both name the file and row of a bad value.
"""

from __future__ import annotations

import json
from typing import Any

from dataflow_operator.runtime.sources.formats import format_of
from dataflow_operator.runtime.sources.options import NO_UNTIL, SourceOptions
from dataflow_operator.runtime.storage import Location
from dataflow_operator.runtime.values import BadValue, convert

__all__ = [
    "PRODUCER_UPPER",
    "newest_integer",
    "newest_time",
    "producer_upper",
    "progress_upper",
    "time_and_diff",
]

PRODUCER_UPPER = "_upper.json"
"""A changelog directory's progress file: ``{"upper": ms, ...}``, replaced atomically by
its producer once every update at a time below ``upper`` is in the directory's files (a
MaterializedView's sink writes it so, with its ``batch``)."""


def time_and_diff(record: dict[str, Any], options: SourceOptions, where: str) -> tuple[int, int]:
    """A changelog record's time and diff; a :class:`BadValue` naming ``where`` if either
    is not an integer."""
    time_column, diff_column = options.time_column, options.diff_column
    try:
        time = convert(record.get(time_column), "long")
    except BadValue:
        raise BadValue(
            f"{where}: time column {time_column!r} is not an integer: {record.get(time_column)!r}"
        ) from None
    raw = record.get(diff_column)
    if isinstance(raw, str) and raw.strip().lstrip("+-").isdigit():
        raw = int(raw)
    if not isinstance(raw, int) or isinstance(raw, bool):
        raise BadValue(f"{where}: diff column {diff_column!r} is not an integer: {raw!r}")
    if time is None:
        raise BadValue(f"{where}: time column {time_column!r} is missing")
    return int(time), raw


def newest_time(file: Location, options: SourceOptions) -> int | None:
    """The newest time in a changelog file, ``None`` when it has no rows: by Arrow when it
    can tell (a bad diff is then reported when the file is read),
    else row by row, both by the file's format."""
    file_format = format_of(file, options.format)
    newest = file_format.newest_integer(file, options.time_column)
    if newest is not None:
        return newest
    rows = file_format.records(file)
    times = (time_and_diff(r, options, f"{file.name}: row {n}")[0] for n, r in enumerate(rows, 1))
    return max(times, default=None)


def newest_integer(file: Location, file_format: str, column: str) -> int | None:
    """The largest value of ``column`` in a file of a source whose format is
    ``file_format``, read by Arrow; ``None`` when Arrow cannot tell it exactly (no rows,
    CSV, a value that is not an integer, a null): read the file row by row then."""
    return format_of(file, file_format).newest_integer(file, column)


def producer_upper(directory: Location) -> int | None:
    """The upper in ``directory``'s :data:`PRODUCER_UPPER`; ``None`` when there is none or
    it does not hold an integer ``upper``."""
    try:
        text = directory.child(PRODUCER_UPPER).read_text_or_none()
        upper = json.loads(text)["upper"] if text else None
    except (ValueError, KeyError, TypeError):
        return None
    return upper if isinstance(upper, int) and not isinstance(upper, bool) else None


def progress_upper(options: SourceOptions, now: int | None) -> int | None:
    """How far a changelog source is complete without new files at clock time ``now``: the
    producer's own upper (the directory's ``_upper.json``, as a MaterializedView's sink
    writes it) and the clock's time + 1 minus the allowed lateness, never past the
    expiration; ``None`` when neither is known (see docs/frontiers.md)."""
    bounds = []
    producer = producer_upper(options.path)
    if producer is not None:
        bounds.append(producer)
    if options.lateness is not None and now is not None:
        bounds.append(now + 1 - options.lateness)
    if not bounds:
        return None
    upper = max(bounds)
    if options.expiration != NO_UNTIL:
        upper = min(upper, options.expiration)
    return upper
