"""Rows appended to a table, atomically: one new file per call, written whole.

All the rows of one call land in one new JSON-lines file of the table's directory (a
path or a URI, as the source's ``path``), written whole (a hidden name renamed into
place, or one object-store PUT), so a replica reads all of them or none. Each row's time
is the time of the batch that ingests it. The ``insert`` command and the replica's
warm-up both write this way.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

from dataflow_operator.runtime.storage import Location

__all__ = ["insert_rows"]


def insert_rows(directory: Path | str | Location, rows: list[dict[str, object]]) -> Location:
    """Write ``rows`` as one JSON-lines file in ``directory`` (created if missing)."""
    name = f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.json"
    target = Location.of(directory).child(name)
    target.write_text("".join(json.dumps(row, separators=(",", ":")) + "\n" for row in rows))
    return target
