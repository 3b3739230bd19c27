"""``dataflow-operator insert PATH JSON...``: append rows to a table, atomically.

All the rows of one call land in one new file of the table's directory, written under a
hidden name and renamed into place, so a replica reads all of them or none. Each row's
time is the time of the batch that ingests it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from pathlib import Path

from dataflow_operator.api.injection import EXIT_OK, EXIT_USAGE

__all__ = ["configure", "insert_rows", "run"]


def insert_rows(directory: Path, rows: list[dict[str, object]]) -> Path:
    """Write ``rows`` as one JSON-lines file in ``directory`` (created if missing)."""
    directory.mkdir(parents=True, exist_ok=True)
    name = f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.json"
    temporary = directory / f".{name}.tmp"
    with temporary.open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, separators=(",", ":")) + "\n")
        out.flush()
        os.fsync(out.fileno())
    target = directory / name
    os.replace(temporary, target)
    return target


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``insert``."""
    parser.add_argument("path", type=Path, help="the table's directory (its source path)")
    parser.add_argument(
        "rows", nargs="+", metavar="JSON", help="rows as JSON objects, e.g. '{\"a\": 1}'"
    )


def run(args: argparse.Namespace) -> int:
    """Append the rows; one line per problem and exit 2 if any row is not a JSON object."""
    rows: list[dict[str, object]] = []
    for number, text in enumerate(args.rows, start=1):
        try:
            row = json.loads(text)
        except json.JSONDecodeError as error:
            print(f"insert: row {number}: not JSON: {error.msg}", file=sys.stderr)
            return EXIT_USAGE
        if not isinstance(row, dict):
            print(f"insert: row {number}: expected a JSON object, got {text}", file=sys.stderr)
            return EXIT_USAGE
        rows.append(row)
    target = insert_rows(args.path, rows)
    print(f"inserted {len(rows)} row(s) into {target}", file=sys.stderr)
    return EXIT_OK
