"""A table's consumed insert files, folded into one file so that its directory stays small.

A ``table`` is written by ``dataflow-operator insert`` only: one JSON-lines file per call,
each row inserted at the time of the batch that ingests it. A table has no deletes, so
every row stays live; what would grow without bound is the number of files every reader
lists at every batch. Once every reader of the table has ingested a file durably (the
release's rule, :mod:`dataflow_operator.runtime.engine.release`), the engine folds such
files into the table's next **fold**, ``_folds/fold-<n>.parquet``: the previous fold's
rows and theirs, each row kept as a JSON line with the name of the file it came from (a
file without rows as one null line), and then removes them.

A fold changes what is listed, never what is read. The table's files are the directory's
and the latest fold's members (:func:`table_files`): a reader that read a file before it
was folded knows its name and never reads it again; one that did not (a new dataflow, a
new replica, a changed spec) reads the members no longer in the directory from the
latest fold (:func:`fold_records`), also when a file goes between planning and reading.
A fold is written whole before the files it holds are removed, and a fold is removed only
once two later ones hold all its members, so every file is always in the directory or in
the latest fold, and a reader that opens a fold as it is replaced finds the newer one.

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

__all__ = ["FOLDS_DIR", "Fold", "fold_records", "fold_table", "latest_fold", "table_files"]

FOLDS_DIR = "_folds"
"""The folds' directory in the table's (``_``: never listed as a data file)."""
MEMBER = "file"
LINE = "line"
SCHEMA = pa.schema([pa.field(MEMBER, pa.string()), pa.field(LINE, pa.string())])
FOLDED_SUFFIX = ".json"
"""Only the files ``insert`` writes are folded (anything else stays and is read as is)."""
LOCK = ".lock"
LOCK_STALE_SECONDS = 600.0
"""A lock this old was left by a process that died while folding: it is broken."""
_NAME = re.compile(r"fold-(\d+)\.parquet")


@dataclass(frozen=True, slots=True)
class Fold:
    """One fold of a table: the rows of the files it holds, by file."""

    location: Location
    number: int

    def members(self) -> list[str]:
        """The names of the files it holds, in the order they were folded."""
        seen: dict[str, None] = {}
        for batch in self.location.read_parquet_batches(columns=[MEMBER]):
            seen.update(dict.fromkeys(batch.column(0).to_pylist()))
        return list(seen)


def latest_fold(table: Location) -> Fold | None:
    """The table's newest fold, if it has one."""
    found = [
        (int(match[1]), name)
        for name in table.child(FOLDS_DIR).list()
        if (match := _NAME.fullmatch(name)) is not None
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
    """``(file, record)`` for each row of ``files`` in the table's latest fold; a file in
    neither the directory nor the fold is an error that names it."""
    wanted = set(files)
    found: set[str] = set()
    for attempt in range(3):
        fold = latest_fold(table)
        if fold is None:
            break
        try:
            batches = fold.location.read_parquet_batches()
            first = next(batches, None)  # opens the file
        except FileNotFoundError:
            if attempt == 2:
                raise
            continue  # replaced by a newer fold meanwhile: it holds the same files
        for batch in [] if first is None else itertools.chain([first], batches):
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
        folded = set(latest.members()) if latest is not None else set()
        present = {name for name in table.list() if name.endswith(FOLDED_SUFFIX)}
        done = [name for name in files if name in present and name in folded]
        new = [name for name in files if name in present and name not in folded]
        if new:
            number = latest.number + 1 if latest is not None else 0
            rows = _rows(table, new)
            parts = [latest.location.read_parquet().cast(SCHEMA)] if latest is not None else []
            target = table.child(FOLDS_DIR, f"fold-{number:012d}.parquet")
            target.write_parquet(pa.concat_tables([*parts, rows]))
            latest = Fold(target, number)
        for name in [*done, *new]:
            table.child(name).delete()
        if latest is not None:  # the one before stays for readers that just opened it
            for name in table.child(FOLDS_DIR).list():
                match = _NAME.fullmatch(name)
                if match is not None and int(match[1]) < latest.number - 1:
                    table.child(FOLDS_DIR, name).delete()
        return len(done) + len(new)


def _rows(table: Location, names: Sequence[str]) -> pa.Table:
    members: list[str] = []
    lines: list[str | None] = []
    for name in names:
        count = 0
        for record in iter_json_lines(table.child(name).read_lines(), name):
            members.append(name)
            lines.append(json.dumps(record, separators=(",", ":")))
            count += 1
        if not count:  # remembered, so that a reader that lists it finds it
            members.append(name)
            lines.append(None)
    return pa.table({MEMBER: members, LINE: lines}, schema=SCHEMA)


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
