"""What a source's reader keeps in its log directory, and the data files it lists.

- ``files.log``: every file of the source's directory the reader has seen, in order,
  with when the listing that first saw it was taken (:func:`read_listing`);
- :data:`HELD_FILE`: the changelog input held back at the expiration (:class:`HeldInput`);
- :data:`INGESTED_DIR`: the ingested collection (:mod:`.ingested`);
- :data:`SKIPPED_LOG`: a table's files that are not rows (:func:`table_rows_files`).

The files themselves are read by their format (:mod:`.formats`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from dataflow_operator.runtime.storage import Location

__all__ = [
    "FILES_LOG",
    "HELD_FILE",
    "INGESTED_DIR",
    "SKIPPED_LOG",
    "TABLE_SUFFIX",
    "HeldInput",
    "list_data_files",
    "read_listing",
    "read_skipped",
    "table_rows_files",
]

FILES_LOG = "files.log"
"""The files a source has seen (name, tab, listing time in epoch ms), one per line."""
INGESTED_DIR = "ingested"
"""The ingested collection's directory in a source's logs."""
HELD_FILE = "held.json"
"""Where a changelog source records the input it holds back at the expiration."""
SKIPPED_LOG = "skipped.log"
"""The files of a table's directory that are not its rows (one name a line, each once)."""
TABLE_SUFFIX = ".json"
"""A table's rows are in the JSON-lines files ``insert`` writes; other files are skipped."""


@dataclass(frozen=True, slots=True)
class HeldInput:
    """A changelog file not read because it has a time at or past the expiration."""

    file: str
    time: int
    """Its newest time."""
    expiration: int

    def to_json(self) -> str:
        """The record's text."""
        return json.dumps({"file": self.file, "time": self.time, "expiration": self.expiration})

    @classmethod
    def read(cls, log_dir: Location) -> HeldInput | None:
        """The input a source's reader holds back (its log directory), if any."""
        text = log_dir.child(HELD_FILE).read_text_or_none()
        if not text:
            return None
        record = json.loads(text)
        return cls(str(record["file"]), int(record["time"]), int(record["expiration"]))


def list_data_files(directory: Location) -> list[str]:
    """Names of the data files of a directory (hidden and ``_`` files are in progress)."""
    return directory.list()


def table_rows_files(names: list[str], log_dir: Location) -> list[str]:
    """The names among a table directory's ``names`` that hold its rows (``.json``); the
    others (``.tmp``, ``.txt``, ``.csv``…) are skipped, and each is recorded once in
    :data:`SKIPPED_LOG` (the engine warns of it)."""
    rows = [name for name in names if name.lower().endswith(TABLE_SUFFIX)]
    others = [name for name in names if not name.lower().endswith(TABLE_SUFFIX)]
    if others:
        known = set(read_skipped(log_dir))
        new = [name for name in others if name not in known]
        if new:
            log_dir.child(SKIPPED_LOG).append_text("".join(f"{name}\n" for name in new))
    return rows


def read_skipped(log_dir: Location) -> list[str]:
    """The files a table's reader skipped (:func:`table_rows_files`), in order."""
    text = log_dir.child(SKIPPED_LOG).read_text_or_none() or ""
    return [line for line in text.splitlines() if line]


def read_listing(log_dir: Location) -> list[tuple[str, int]]:
    """The files a source has seen, in order, with the wall-clock time (epoch ms) of the
    listing that first saw each (0 when the log does not say)."""
    text = log_dir.child(FILES_LOG).read_text_or_none() or ""
    found = []
    for line in text.splitlines():
        if line:
            name, _, listed = line.partition("\t")
            found.append((name, int(listed) if listed.isdigit() else 0))
    return found
