"""Which format reads a source's file: :func:`format_of`."""

from __future__ import annotations

from dataflow_operator.runtime.sources.csv_format import Csv
from dataflow_operator.runtime.sources.file_format import FileFormat
from dataflow_operator.runtime.sources.json_format import JsonLines
from dataflow_operator.runtime.sources.parquet_format import Parquet
from dataflow_operator.runtime.storage import Location

__all__ = ["CSV", "FORMATS", "JSON_LINES", "PARQUET", "format_of", "suffix_of"]

JSON_LINES = JsonLines()
CSV = Csv()
PARQUET = Parquet()
FORMATS: dict[str, FileFormat] = {f.name: f for f in (JSON_LINES, CSV, PARQUET)}
"""Every format, by its name in a source's spec."""


def suffix_of(file: Location) -> str:
    """A file name's extension, lower case (empty without one)."""
    return file.name.rsplit(".", 1)[-1].lower() if "." in file.name else ""


def format_of(file: Location, declared: str) -> FileFormat:
    """The format that reads ``file`` of a source whose spec says ``declared``
    (the runtime's stored changelogs: ``parquet``).

    A ``.parquet`` or ``.csv`` suffix wins; then a ``csv`` source reads its file as CSV,
    and a ``parquet`` source reads as Parquet a file whose suffix is not ``.json``;
    everything else is JSON lines.
    """
    suffix = suffix_of(file)
    if suffix in (PARQUET.name, CSV.name):
        return FORMATS[suffix]
    if declared == CSV.name:
        return CSV
    if declared == PARQUET.name and suffix != JSON_LINES.name:
        return PARQUET
    return JSON_LINES
