"""A table's consumed insert files, folded into a few files so that its directory stays
small, at a cost that grows with what is folded, not with the table.

A ``table`` is written by ``dataflow-operator insert`` only: one JSON-lines file per call,
each row inserted at the time of the batch that ingests it. A table has no deletes, so
every row stays live; what would grow without bound is the number of files every reader
lists at every batch. Once every reader of the table has ingested a file durably (the
release's rule, :mod:`dataflow_operator.runtime.engine.release`), the engine folds such
files into the table's next **fold**, ``_folds/fold-<n>.json``, and then removes them.

A fold is a list of **segments**, Parquet files in ``_folds`` that hold whole files' rows,
each row kept as a JSON line with the name of the file it came from (a file without rows
as one null line), and the names of the files each holds. The next fold keeps the
previous one's segments and adds one: the new files' rows, merged with the newest
segments while the newest is less than :data:`MERGE_RATIO` times the rows they add up
to. So each segment holds at least twice the rows of the one after it, a table of ``n``
rows has at most ``log2(n) + 1`` segments, and a row is rewritten about that many times
over its life, where rewriting the whole table at each fold would cost each fold the
table's size. A fold written before segments (``fold-<n>.parquet``, one file holding
everything) is read as a fold of one segment, itself, and kept as the next fold's first.

A fold changes what is listed, never what is read. The table's files are the directory's
and the latest fold's members (:func:`table_files`): a reader that read a file before it
was folded knows its name and never reads it again; one that did not (a new dataflow, a
new replica, a changed spec) reads the members no longer in the directory from the
segments of the latest fold that hold them (:func:`fold_records`), also when a file goes
between planning and reading. A fold and its new segment are written whole before the
files it holds are removed, and a fold, or a segment, is removed only once neither the
latest fold nor the one before refers to it, so every file is always in the directory or
in the latest fold, and a reader that opens a fold as it is replaced finds the newer one.

One process folds a table at a time: an exclusive lock file in ``_folds`` (local and
mounted file systems; a table on an object store is not folded).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import time as wall
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from dataflow_operator.runtime.storage import Location
from dataflow_operator.runtime.values import iter_json_lines

__all__ = [
    "FOLDS_DIR",
    "MERGE_RATIO",
    "Fold",
    "Segment",
    "fold_records",
    "fold_table",
    "latest_fold",
    "table_files",
]

FOLDS_DIR = "_folds"
"""The folds' directory in the table's (``_``: never listed as a data file)."""
MEMBER = "file"
LINE = "line"
SCHEMA = pa.schema([pa.field(MEMBER, pa.string()), pa.field(LINE, pa.string())])
FOLDED_SUFFIX = ".json"
"""Only the files ``insert`` writes are folded (anything else stays and is read as is)."""
MERGE_RATIO = 2
"""A segment at least this many times the rows of what comes after it is not rewritten."""
LOCK = ".lock"
LOCK_STALE_SECONDS = 600.0
"""A lock this old was left by a process that died while folding: it is broken."""
_FOLD = re.compile(r"fold-(\d+)\.(json|parquet)")
_SEGMENT = re.compile(r"segment-\d+\.parquet")


@dataclass(frozen=True, slots=True)
class Segment:
    """One Parquet file of a fold: the rows of the files it holds."""

    name: str
    """Its file name in the folds' directory."""
    rows: int
    members: tuple[str, ...]
    """The names of the files it holds, in the order they were folded."""


@dataclass(frozen=True, slots=True)
class Fold:
    """One fold of a table: its segments, oldest first."""

    location: Location
    """Its list of segments (``fold-<n>.json``), or a fold written before segments
    (``fold-<n>.parquet``), which is its own one segment."""
    number: int

    def segments(self) -> list[Segment]:
        """Its segments, oldest first."""
        if self.location.name.endswith(".parquet"):
            members: dict[str, None] = {}
            for batch in self.location.read_parquet_batches(columns=[MEMBER]):
                members.update(dict.fromkeys(batch.column(0).to_pylist()))
            rows = self.location.parquet_rows()
            return [Segment(self.location.name, rows, tuple(members))]
        listed = json.loads(self.location.read_text())["segments"]
        return [Segment(s["name"], s["rows"], tuple(s["members"])) for s in listed]

    def members(self) -> list[str]:
        """The names of the files it holds, in the order they were folded."""
        return [member for segment in self.segments() for member in segment.members]


def latest_fold(table: Location) -> Fold | None:
    """The table's newest fold, if it has one."""
    found = [
        (int(match[1]), name)
        for name in table.child(FOLDS_DIR).list()
        if (match := _FOLD.fullmatch(name)) is not None
    ]
    if not found:
        return None
    number, name = max(found)
    return Fold(table.child(FOLDS_DIR, name), number)


def table_files(visible: Sequence[str], fold_members: Sequence[str]) -> list[str]:
    """The table's files: the latest fold's members, then the directory's other files."""
    folded = set(fold_members)
    return [*fold_members, *(name for name in visible if name not in folded)]


def fold_records(table: Location, files: Collection[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(file, record)`` for each row of ``files`` in the table's latest fold, read from
    the segments that hold them; a file in neither the directory nor the fold is an error
    that names it."""
    wanted = set(files)
    found: set[str] = set()
    for attempt in range(3):
        fold = latest_fold(table)
        if fold is None:
            break
        try:
            opened = _opened(table, fold, wanted)
        except FileNotFoundError:
            if attempt == 2:
                raise
            continue  # replaced by a newer fold meanwhile: it holds the same files
        for batch in itertools.chain.from_iterable(opened):
            members = batch.column(0).to_pylist()
            lines = batch.column(1).to_pylist()
            for member, line in zip(members, lines, strict=True):
                if member not in wanted:
                    continue
                found.add(member)
                if line is not None:
                    yield member, next(iter_json_lines([line], member))
        break
    missing = sorted(wanted - found)
    if missing:
        raise FileNotFoundError(
            f"table {table}: {', '.join(missing)} is gone from the directory and its folds"
        )


def _opened(table: Location, fold: Fold, wanted: set[str]) -> list[Iterator[pa.RecordBatch]]:
    """The batches of each of ``fold``'s segments that holds a file in ``wanted``, every
    one opened before any is read (so that a fold replaced meanwhile is retried whole)."""
    opened: list[Iterator[pa.RecordBatch]] = []
    for segment in fold.segments():
        if wanted.isdisjoint(segment.members):
            continue
        batches = table.child(FOLDS_DIR, segment.name).read_parquet_batches()
        first = next(batches, None)  # opens the file
        opened.append(iter([]) if first is None else itertools.chain([first], batches))
    return opened


def fold_table(table: Location, files: Sequence[str]) -> int:
    """Fold ``files`` of ``table`` (every reader has ingested them; those ``insert``
    wrote: JSON) into a new fold, then remove them; how many were removed (0 when another
    process is folding the table).

    Files still in the directory that the latest fold already holds (a fold interrupted
    before it removed them) are only removed.
    """
    with _lock(table) as held:
        if not held:
            return 0
        latest = latest_fold(table)
        segments = latest.segments() if latest is not None else []
        folded = {member for segment in segments for member in segment.members}
        present = {name for name in table.list() if name.endswith(FOLDED_SUFFIX)}
        done = [name for name in files if name in present and name in folded]
        new = [name for name in files if name in present and name not in folded]
        if new:
            number = latest.number + 1 if latest is not None else 0
            segments = _appended(table, segments, new, number)
            listed = [{"name": s.name, "rows": s.rows, "members": s.members} for s in segments]
            target = table.child(FOLDS_DIR, f"fold-{number:012d}.json")
            target.write_text(json.dumps({"segments": listed}, separators=(",", ":")))
            latest = Fold(target, number)
        for name in [*done, *new]:
            table.child(name).delete()
        if latest is not None:
            _remove_unused(table, latest, segments)
        return len(done) + len(new)


def _appended(
    table: Location, segments: Sequence[Segment], files: Sequence[str], number: int
) -> list[Segment]:
    """``segments`` and a new one with the rows of ``files``, merged with the newest
    segments while they hold less than :data:`MERGE_RATIO` times the rows merged."""
    rows = _rows(table, files)
    kept = list(segments)
    merged: list[Segment] = []
    count = rows.num_rows
    while kept and kept[-1].rows < MERGE_RATIO * count:
        merged.insert(0, kept.pop())
        count += merged[0].rows
    parts = [table.child(FOLDS_DIR, s.name).read_parquet().cast(SCHEMA) for s in merged]
    name = f"segment-{number:012d}.parquet"
    table.child(FOLDS_DIR, name).write_parquet(pa.concat_tables([*parts, rows]))
    members = tuple(itertools.chain.from_iterable(s.members for s in merged)) + tuple(files)
    return [*kept, Segment(name, count, members)]


def _remove_unused(table: Location, latest: Fold, segments: Sequence[Segment]) -> None:
    """Remove the folds before the one before ``latest`` (``segments``: its own; a reader
    may just have opened the one before) and the segments neither refers to."""
    names = table.child(FOLDS_DIR).list()
    kept = {latest.location.name, *(segment.name for segment in segments)}
    for name in names:
        match = _FOLD.fullmatch(name)
        if match is not None and int(match[1]) == latest.number - 1:
            previous = Fold(table.child(FOLDS_DIR, name), latest.number - 1)
            kept.update([name, *(segment.name for segment in previous.segments())])
    for name in names:
        if (_FOLD.fullmatch(name) or _SEGMENT.fullmatch(name)) and name not in kept:
            table.child(FOLDS_DIR, name).delete()


def _rows(table: Location, names: Sequence[str]) -> pa.Table:
    members: list[str] = []
    lines: list[str | None] = []
    for name in names:
        found = _json_lines(table.child(name))
        members.extend([name] * max(1, len(found)))
        lines.extend(found or [None])  # a file without rows: remembered, as readers list it
    return pa.table({MEMBER: members, LINE: lines}, schema=SCHEMA)


def _json_lines(file: Location) -> list[str]:
    """The file's rows as JSON lines, as they are: every reader has parsed them already
    (a file that is one JSON array is parsed, each of its objects a line)."""
    lines = [stripped for line in file.read_text().splitlines() if (stripped := line.strip())]
    if lines and lines[0].startswith("["):
        records = iter_json_lines(lines, file.name)
        return [json.dumps(record, separators=(",", ":")) for record in records]
    return lines


@contextmanager
def _lock(table: Location) -> Iterator[bool]:
    """Hold the table's fold lock; yields False when another process holds it (or the
    table is not on a file system that can lock)."""
    directory = table.child(FOLDS_DIR).local_path
    if directory is None:
        yield False
        return
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / LOCK
    for attempt in range(2):
        try:
            handle = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            break
        except FileExistsError:
            try:
                stale = wall.time() - path.stat().st_mtime > LOCK_STALE_SECONDS
            except FileNotFoundError:
                stale = True  # released meanwhile
            if attempt or not stale:
                yield False
                return
            path.unlink(missing_ok=True)
    try:
        yield True
    finally:
        os.close(handle)
        path.unlink(missing_ok=True)
