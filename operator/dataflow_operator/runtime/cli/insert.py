"""``dataflow-operator insert PATH JSON...``: append rows to a table, atomically.

The rows of one call land in one new file of the table's directory (a path or a URI,
as the source's ``path``), written whole by
:func:`~dataflow_operator.runtime.inserts.insert_rows`: a replica reads all of them or
none.
"""

from __future__ import annotations

import argparse
import json
import sys

from dataflow_operator.api.injection import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from dataflow_operator.runtime.inserts import insert_rows
from dataflow_operator.runtime.storage import StorageError

__all__ = ["configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``insert``."""
    parser.add_argument(
        "path", metavar="PATH|URI", help="the table's directory (its source path, or a URI)"
    )
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
    try:
        target = insert_rows(args.path, rows)
    except (StorageError, OSError) as error:
        print(f"insert: {args.path}: {error}", file=sys.stderr)
        return EXIT_FAILED
    print(f"inserted {len(rows)} row(s) into {target}", file=sys.stderr)
    return EXIT_OK
