"""``dataflow-operator subscribe NAME``: print a dataflow's changelog as it happens.

Prints the lines of ``GET /dataflows/{name}/subscribe`` — ``TIME<TAB>DIFF<TAB>col…``,
the same lines ``dataflow-operator run`` prints for a Subscribe: first the contents at
``--as-of`` (default: the latest complete time), then every update as its batch
completes. ``--no-snapshot`` with ``--as-of T`` resumes after time ``T``; ``--progress``
also prints ``#progress<TAB>T`` lines (every update at a time ``<= T`` has been printed).

The replica restarting does not end it: when the stream ends because the replica shuts
down (an expiration restart, a make-before-break cutover) or the connection breaks, it
reconnects — to the same Replica, whose driver Service then points at the new driver —
and resumes after the last complete time it printed, for up to ``--reconnect-timeout``.
Lines are printed a whole time at a time, so a resumed stream repeats and loses nothing.
Ctrl-C ends it quietly (exit 0); a failure prints one line on stderr and exits 1.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from dataclasses import dataclass, field
from types import FrameType

import urllib3

from dataflow_operator.client.connect import add_arguments, iter_lines, open_endpoint
from dataflow_operator.client.control_http import ClientError
from dataflow_operator.core.durations import parse_duration
from dataflow_operator.core.errors import DomainError

__all__ = ["configure", "run"]

RESUMED_REASONS = frozenset({"ShuttingDown"})
"""``#end`` reasons after which the stream resumes (the others say why it cannot)."""
RETRIED_STATUSES = frozenset({404, 502, 503, 504})
"""Answers a restarting replica gives while reconnecting: not there yet, not ready yet."""
MAX_BACKOFF_S = 5.0


@dataclass(slots=True)
class _Stream:
    """Where the printed stream stands: the last complete time and the time being read."""

    complete: int | None = None
    """Every update at a time ``<=`` this has been printed."""
    pending: list[str] = field(default_factory=list)
    """Lines of times not complete yet (printed once their ``#progress`` comes)."""


class _Ended(Exception):
    """The replica ended the stream for good; the message says why."""


class _Interrupted(Exception):
    """The stream stopped where it can be resumed; the message says why."""


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
    parser.add_argument(
        "--reconnect-timeout",
        default="5m",
        metavar="DURATION",
        help="how long to keep reconnecting after the replica restarts or the connection "
        "breaks ('0': never reconnect; default 5m)",
    )


def run(args: argparse.Namespace) -> int:
    """Stream until the replica ends the stream for good, reconnecting fails, or Ctrl-C."""
    try:
        patience = parse_duration(args.reconnect_timeout).millis / 1000
    except DomainError as error:
        print(f"subscribe: --reconnect-timeout: {error}", file=sys.stderr)
        return 2
    stream = _Stream(complete=args.as_of if args.no_snapshot else None)
    signal.signal(signal.SIGTERM, _stop)  # a container's stop ends it as Ctrl-C does
    try:
        _follow(args, stream, patience)
    except (ClientError, _Ended) as error:
        print(f"subscribe: {error}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, BrokenPipeError):
        return 0
    return 0


def _stop(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _follow(args: argparse.Namespace, stream: _Stream, patience: float) -> None:
    """Print the stream; after an interruption reconnect and resume, until told to stop.

    Nothing is printed before its time is complete, so resuming after the last complete
    time (or from the start, when none was) repeats and loses nothing.
    """
    response = open_endpoint(args, "subscribe", _query(args, stream))
    while True:
        try:
            _print(args, stream, response)
        except _Interrupted as why:
            if patience <= 0:
                raise _Ended(str(why)) from None
            where = f"after {stream.complete}" if stream.complete is not None else "from the start"
            print(f"subscribe: {why}; resuming {where}", file=sys.stderr, flush=True)
            response = _reconnect(args, stream, patience)


def _reconnect(
    args: argparse.Namespace, stream: _Stream, patience: float
) -> urllib3.BaseHTTPResponse:
    """The stream again, once the replica answers (waiting at most ``patience`` seconds)."""
    deadline = time.monotonic() + patience
    delay = 0.25
    while True:
        try:
            return open_endpoint(args, "subscribe", _query(args, stream))
        except ClientError as error:
            retried = error.status is None or error.status in RETRIED_STATUSES
            if not retried or time.monotonic() + delay > deadline:
                raise
        time.sleep(delay)
        delay = min(MAX_BACKOFF_S, delay * 2)


def _query(args: argparse.Namespace, stream: _Stream) -> dict[str, str]:
    query = {"progress": "true"}  # always: the resume point, even when nothing changes
    if stream.complete is not None:
        query |= {"asOf": str(stream.complete), "snapshot": "false"}
    elif args.as_of is not None:
        query["asOf"] = str(args.as_of)
    return query


def _print(args: argparse.Namespace, stream: _Stream, response: urllib3.BaseHTTPResponse) -> None:
    """Print one connection's stream, a whole time at a time; raise how it ended."""
    out = sys.stdout
    stream.pending.clear()
    try:
        for line in iter_lines(response):
            if line.startswith("#end\t"):
                _, reason, complete, message = [*line.split("\t", 3), "", "", ""][:4]
                if complete not in ("", "-"):
                    stream.complete = int(complete)
                text = f"the replica ended the stream: {reason}: {message}"
                if reason in RESUMED_REASONS:
                    raise _Interrupted(text)
                raise _Ended(text)
            if line.startswith("#progress\t"):
                stream.complete = int(line.split("\t")[1])
                out.writelines(item + "\n" for item in stream.pending)
                stream.pending.clear()
                if args.progress:
                    out.write(line + "\n")
                out.flush()
                continue
            stream.pending.append(line)
    except BrokenPipeError:
        raise
    except (urllib3.exceptions.HTTPError, OSError) as error:
        raise _Interrupted(f"the stream from the replica broke: {error}") from None
    raise _Interrupted("the replica closed the stream")
