"""What ``run`` prints on stdout: its Subscribes' output, a step at a time, in time order.

The printer reads what it prints from each Subscribe's output changelog, the store the
replica's subscribe stream reads too. After each step (:meth:`SubscribePrinter.flush`) it
reads the batches recorded since those it printed last, writes their updates sorted by
time (several Subscribes' lines interleaved by time, each starting with its dataflow's
name), and then records the last batch printed in the changelog itself
(:data:`PRINTED_FILE`, beside the batches' parts).

So a run killed at any point — after Spark committed a batch, before the step's lines were
written — prints, when it starts again on the same state, what was committed and not yet
printed, before anything new (its first :meth:`SubscribePrinter.flush`, as it starts).
Lines are printed twice only when the kill falls between writing a step's lines and
recording them (one small file's write). A changelog without that record (a new dataflow,
one started over for a changed spec, which removes its changelog with the record) is
printed from its beginning.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, TextIO

from dataflow_operator.logs import get_logger
from dataflow_operator.runtime.changelog_store import DIFF, TIME, ChangelogStore
from dataflow_operator.runtime.values import format_update

__all__ = ["PRINTED_FILE", "SubscribePrinter", "printed_through"]

log = get_logger(__name__)

PRINTED_FILE = "printed.json"
"""In a Subscribe's changelog: ``{"batch": N}``, the last batch ``run`` has printed."""


def printed_through(store: ChangelogStore) -> int:
    """The last batch of ``store`` that ``run`` printed; -1 when none was."""
    text = store.location.child(PRINTED_FILE).read_text_or_none()
    if text is None:
        return -1
    try:
        return int(json.loads(text)["batch"])
    except (ValueError, KeyError, TypeError):
        log.warning("unreadable print record; printing the changelog again", store=str(store.path))
        return -1


@dataclass(frozen=True, slots=True)
class _Line:
    time: int
    text: str


class SubscribePrinter:
    """Writes Subscribes' output changelogs to a stream as ``TIME<TAB>DIFF<TAB>col…`` lines.

    ``names``: the Subscribes whose lines are written; with more than one, each line starts
    with the dataflow's name and a tab. Only the changelogs given to :meth:`follow` are
    read. Not thread-safe: ``run`` calls it from its loop.
    """

    def __init__(self, out: TextIO, names: Collection[str]) -> None:
        self.out = out
        self.names = frozenset(names)
        self._stores: dict[str, ChangelogStore] = {}
        self._printed: dict[str, int] = {}
        """Per followed dataflow: the last batch printed (read once, then kept here)."""

    def follow(self, name: str, store: ChangelogStore) -> None:
        """Print dataflow ``name``'s changelog (if it is one of ``names``) at each
        :meth:`flush`, from the first batch no run has printed."""
        if name in self.names:
            self._stores[name] = store
            self._printed[name] = printed_through(store)

    def flush(self) -> None:
        """Write every followed changelog's batches not yet printed, in time order, and
        record them as printed."""
        lines: list[_Line] = []
        printed: dict[str, int] = {}
        for name in sorted(self._stores):
            store = self._stores[name]
            recorded = store.read_upper()
            after = self._printed[name]
            if recorded is None or recorded.batch <= after:
                continue
            prefix = f"{name}\t" if len(self.names) > 1 else ""
            for _, part in store.parts(after, recorded.batch):
                lines += _lines(part.read_parquet().to_pylist(), prefix)
            printed[name] = recorded.batch
        if not printed:
            return
        lines.sort(key=lambda line: line.time)  # stable: each dataflow's own order stays
        self.out.write("".join(line.text for line in lines))
        self.out.flush()
        for name, batch in printed.items():
            self._stores[name].location.child(PRINTED_FILE).write_text(json.dumps({"batch": batch}))
            self._printed[name] = batch


def _lines(rows: list[dict[str, Any]], prefix: str) -> list[_Line]:
    """One part's rows as lines, in time order (retractions first within a time)."""
    updates = sorted(
        (
            (int(row[TIME]), int(row[DIFF]), [v for k, v in row.items() if k not in (TIME, DIFF)])
            for row in rows
        ),
        key=lambda update: (update[0], update[1]),
    )
    return [_Line(t, f"{prefix}{format_update(t, d, values)}\n") for t, d, values in updates]
