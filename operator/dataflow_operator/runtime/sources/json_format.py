"""JSON lines: one object per line (or a file that is one JSON array of objects).

Row by row, each line is parsed by Python's :mod:`json`
(:func:`~dataflow_operator.runtime.values.iter_json_lines`). By Arrow, the file is read
in chunks of whole lines (:data:`CHUNK_BYTES` or a little more), each parsed with an
explicit schema: every column's Arrow type, and ``int64`` for the time and diff.

The choices (:mod:`.file_format`):

- columns: Arrow reads the file only when every column's Spark type is one Arrow parses
  from JSON as the row-by-row reading converts it (:data:`PARSED`: integers, floating
  point, strings, booleans, timestamps written as text), and the time and diff are not
  also columns of another type;
- the file: one JSON array (its first non-blank line starts with ``[``) is read whole,
  row by row, as the row-by-row reading reads it;
- each chunk: by Arrow when its bytes are UTF-8 (Arrow does not check), Arrow parses
  every value as its column's type (``"12"`` or
  ``1.0`` in an integer column, a nested object in a string column, a line that is not
  an object: Arrow does not) and the parsed chunk is exact (:mod:`.exact_arrow`: no
  field differing from a column's name only by case, integer times and diffs); else its
  lines row by row, numbered in the file as the row-by-row reading numbers them.
"""

from __future__ import annotations

import functools
import io
import itertools
import re
from collections.abc import Iterable, Iterator
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.json as pa_json

from dataflow_operator.runtime.sources.exact_arrow import (
    UpdateLayout,
    exact_names,
    exact_updates,
    newest_integer,
)
from dataflow_operator.runtime.sources.file_format import (
    ArrowReading,
    Block,
    FileFormat,
    Rows,
    not_utf8,
    utf8_lines,
)
from dataflow_operator.runtime.storage import Location
from dataflow_operator.runtime.values import iter_json_lines, json_objects

__all__ = ["CHUNK_BYTES", "PARSED", "JsonLines", "objects_a_line"]

CHUNK_BYTES = 1 << 20
"""Bytes read at a time: a chunk is these, up to the end of the last whole line."""

PARSED = {
    "byte": pa.int8(),
    "short": pa.int16(),
    "integer": pa.int32(),
    "long": pa.int64(),
    "float": pa.float64(),  # then cast: rounded once from the double, as row by row
    "double": pa.float64(),
    "string": pa.string(),
    "boolean": pa.bool_(),
    "timestamp": pa.string(),  # its text: :func:`.exact_arrow.exact_timestamps` reads it
}
"""Spark types whose JSON values Arrow parses as the row-by-row reading converts them (a
timestamp parsed as text, then converted where that is exact)."""


class JsonLines(FileFormat):
    """JSON lines; see the module docstring."""

    name: ClassVar[str] = "json"

    def records(self, file: Location) -> Iterator[dict[str, Any]]:
        """Each line's object (or the one array's), parsed by Python's :mod:`json`."""
        yield from iter_json_lines(utf8_lines(file), file.name)

    def arrow_reading(self, layout: UpdateLayout) -> ArrowReading | None:
        """Arrow's reading with an explicit schema of the columns, the time and the diff;
        ``None`` when a column's type is not one of :data:`PARSED`, or the time or diff
        is also a column of another type."""
        wanted: dict[str, pa.DataType] = {}
        for name, spark_type, _ in layout.columns.fields:
            if spark_type not in PARSED:
                return None
            wanted[name] = PARSED[spark_type]
        for name in layout.times or ():
            if wanted.setdefault(name, pa.int64()) != pa.int64():
                return None
        parse = pa_json.ParseOptions(
            explicit_schema=pa.schema(list(wanted.items())), unexpected_field_behavior="infer"
        )
        return functools.partial(_blocks, parse=parse, layout=layout)

    def newest_integer(self, file: Location, column: str) -> int | None:
        """By Arrow's streaming reader, ``column`` alone parsed, as ``int64`` (the other
        fields are skipped, whatever they hold): a value that is not an ``int64`` there (a
        string, a fraction, a number past its range, the key twice in an object) fails
        the reading, and the row-by-row reading decides."""
        only = pa_json.ParseOptions(
            explicit_schema=pa.schema([(column, pa.int64())]), unexpected_field_behavior="ignore"
        )
        return newest_integer(_streamed(file, only), column)


def _streamed(file: Location, parse: pa_json.ParseOptions) -> Iterator[pa.RecordBatch]:
    with file.open_stream() as stream:
        yield from pa_json.open_json(stream, parse_options=parse)


def _blocks(
    file: Location, *, parse: pa_json.ParseOptions, layout: UpdateLayout
) -> Iterator[Block]:
    chunks = _chunks(file)
    head = list(_through_first_content(chunks))
    if head and _first_content(head[-1]).startswith("["):
        # One JSON array: the row-by-row reading parses it whole.
        yield Rows(iter_json_lines(_lines(itertools.chain(head, chunks), file.name), file.name))
        return
    line = 1
    for chunk in itertools.chain(head, chunks):
        batch = _exact(chunk, parse, layout)
        if batch is None:
            yield Rows(json_objects(_lines([chunk], file.name), file.name, first_line=line))
        elif batch.num_rows:
            yield batch
        line += _line_count(chunk)


def _exact(
    chunk: bytes, parse: pa_json.ParseOptions, layout: UpdateLayout
) -> pa.RecordBatch | None:
    """The chunk's updates by Arrow (no rows: an empty batch), or ``None`` where Arrow
    does not read them exactly."""
    try:
        chunk.decode("utf-8")  # Arrow takes bytes that are not UTF-8 into strings unchecked
    except UnicodeDecodeError:
        return None  # the row-by-row reading names the file
    options = pa_json.ReadOptions(use_threads=False, block_size=len(chunk) + 1)
    objects = objects_a_line(chunk)
    if objects is None:
        return None  # the row-by-row reading names the line that is not one object
    try:
        table = pa_json.read_json(pa.py_buffer(chunk), read_options=options, parse_options=parse)
    except pa.ArrowException:
        return None  # a value Arrow does not parse as its column's type, a line not an object
    if table.num_rows != objects:
        return None  # a line of two objects
    if not table.num_rows:
        return pa.RecordBatch.from_pylist([], schema=layout.columns.schema)
    names = exact_names(table.schema, parse.explicit_schema.names, exact_only=True)
    if names is None:
        return None
    return exact_updates(table.combine_chunks().to_batches()[0], names, layout)


def _chunks(file: Location) -> Iterator[bytes]:
    """The file's bytes in chunks of whole lines (the last may lack its line feed)."""
    with file.open_stream() as stream:
        pending: list[bytes] = []
        while block := stream.read(CHUNK_BYTES):
            cut = block.rfind(b"\n") + 1
            if not cut:
                pending.append(block)
                continue
            yield b"".join([*pending, block[:cut]])
            pending = [block[cut:]] if cut < len(block) else []
        if pending:
            yield b"".join(pending)


def _through_first_content(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """The chunks up to the first with a non-blank line (all of them if none has)."""
    for chunk in chunks:
        yield chunk
        if _first_content(chunk):
            return


def _first_content(chunk: bytes) -> str:
    """The chunk's first non-blank line, stripped ('' when every line is blank); blank as
    the row-by-row reading sees it (bytes that are not UTF-8 are not blank)."""
    at = 0
    while (at := _end(_SPACE, chunk, at)) < len(chunk):
        end = _end(_LINE, chunk, at)
        text = chunk[at:end].decode("utf-8", errors="replace").strip()
        if text:
            return text
        at = end  # a line of other white space
    return ""


_SPACE = re.compile(rb"[ \t\n\r\x0b\x0c]*")
_LINE = re.compile(rb"[^\n\r]*")


def _end(pattern: re.Pattern[bytes], chunk: bytes, at: int) -> int:
    """Where ``pattern``, which matches the empty string too, stops matching from ``at``."""
    found = pattern.match(chunk, at)
    assert found is not None
    return found.end()


def _lines(chunks: Iterable[bytes], file_name: str) -> Iterator[str]:
    """The chunks' lines as the row-by-row reading splits and decodes them (line feed,
    carriage return, or both; UTF-8), decoded as they are consumed; bytes that are not
    UTF-8 are a :class:`~dataflow_operator.runtime.values.BadValue` naming the file."""
    try:
        for chunk in chunks:
            yield from io.TextIOWrapper(io.BytesIO(chunk), encoding="utf-8", newline="")
    except UnicodeDecodeError as error:
        raise not_utf8(file_name, error) from None


def objects_a_line(chunk: bytes) -> int | None:
    """How many lines of ``chunk`` are not blank, if each starts with ``{`` and ends with
    ``}`` (line feeds, carriage returns or both end a line; spaces and tabs around);
    ``None`` if one does not.

    Arrow's JSON reader takes objects whatever the line breaks between them: an object
    over two lines is one row to it, two objects on a line two rows. When every line
    opens and closes an object, no object spans two lines (after a ``}`` a ``{`` is a
    parse error), so Arrow's rows are these lines' objects one to one exactly when it
    reads as many rows as this count."""
    if b"\r" in chunk:
        chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    body = chunk[:-1] if chunk.endswith(b"\n") else chunk
    breaks = body.count(b"\n")
    if (  # each line exactly an object's text: counted at the speed of a byte search
        body[:1] == b"{"
        and body[-1:] == b"}"
        and body.count(b"\n{") == breaks
        and body.count(b"}\n") == breaks
    ):
        return breaks + 1
    filled = [line for raw in body.split(b"\n") if (line := raw.strip(b" \t\x0b\x0c"))]
    if all(line[:1] == b"{" and line[-1:] == b"}" for line in filled):
        return len(filled)
    return None


def _line_count(chunk: bytes) -> int:
    """The lines in a chunk of whole lines, as :func:`_lines` splits them."""
    breaks = chunk.count(b"\n")
    if b"\r" in chunk:
        breaks += chunk.count(b"\r") - chunk.count(b"\r\n")
    return breaks + (not chunk.endswith((b"\n", b"\r")))
