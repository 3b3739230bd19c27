"""``dataflow-operator subscribe NAME``: print a dataflow's changelog as it happens.

Prints the lines of ``GET /dataflows/{name}/subscribe`` — ``TIME<TAB>DIFF<TAB>col…``,
the same lines ``dataflow-operator run`` prints for a Subscribe: first the contents at
``--as-of`` (default: the latest complete time), then every update as its batch
completes. ``--no-snapshot`` with ``--as-of T`` resumes after time ``T``; ``--progress``
also prints ``#progress<TAB>T`` lines (every update at a time ``<= T`` has been printed).
Ctrl-C ends it quietly (exit 0); a failure prints one line on stderr and exits 1.
"""

from __future__ import annotations

import argparse
import sys

import urllib3

from dataflow_operator.client.connect import ClientError, add_arguments, iter_lines, open_endpoint

__all__ = ["configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``subscribe``."""
    add_arguments(parser, as_of=True)
    parser.add_argument(
        "--no-snapshot",
        action="store_true",
        help="only the updates after --as-of, not the contents at it (to resume)",
    )
    parser.add_argument(
        "--progress", action="store_true", help="also print '#progress<TAB>T' lines"
    )


def run(args: argparse.Namespace) -> int:
    """Stream until the replica ends the stream, the connection fails or Ctrl-C."""
    query = {}
    if args.as_of is not None:
        query["asOf"] = str(args.as_of)
    if args.no_snapshot:
        query["snapshot"] = "false"
    if args.progress:
        query["progress"] = "true"
    out = sys.stdout
    try:
        response = open_endpoint(args, "subscribe", query)
        for line in iter_lines(response):
            if line.startswith("#end\t"):
                _, reason, _, message = [*line.split("\t", 3), "", "", ""][:4]
                print(
                    f"subscribe: the replica ended the stream: {reason}: {message}", file=sys.stderr
                )
                return 1
            if line.startswith("#progress\t") and not args.progress:
                continue
            out.write(line + "\n")
            out.flush()
    except ClientError as error:
        print(f"subscribe: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    except BrokenPipeError:
        return 0
    except (urllib3.exceptions.HTTPError, OSError) as error:
        print(f"subscribe: the stream from the replica broke: {error}", file=sys.stderr)
        return 1
    print("subscribe: the replica closed the stream", file=sys.stderr)
    return 1
