"""The replica's logical clock, shared with the source readers through a file.

The driver's loop decides the time of each batch and writes it here (in the state
location) before asking the streaming queries to catch up; the source readers (which run
in other Python processes) read it in ``latestOffset`` and record it in their offsets,
so the logical time of every batch is in Spark's own offset log.
"""

from __future__ import annotations

import json
import os
import threading
import time as wall
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dataflow_operator.core.time import Timestamp
from dataflow_operator.runtime.storage import Location

__all__ = ["ClockFile", "TickPlan", "atomic_write_text"]

POKE_PERIOD = 0.1
"""How often (s) :meth:`ClockFile.poking` pokes the clock."""


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old or the new content, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


@dataclass(frozen=True, slots=True)
class ClockFile:
    """``{"time": ms, "round": n}``: the logical time of the batch the replica is running
    (and ``"poke": n``, which only wakes the readers: :meth:`poke`).

    ``round`` only grows: :meth:`next_round` asks every source for one more batch at the
    same time (no new input, only the heartbeat), which lets the stateful operators see
    the watermark of the batch before and fire their timers up to it.
    """

    location: Location

    def write(self, time: Timestamp, *, another_round: bool = False) -> None:
        """Advance the clock to ``time`` (the round stays, or grows by one with
        ``another_round``: one batch even when ``time`` moves no source)."""
        self._write(time, self.round() + int(another_round))

    def next_round(self) -> None:
        """One more batch at the current time."""
        time = self.read()
        if time is not None:
            self._write(time, self.round() + 1)

    def poke(self) -> None:
        """Rewrite the clock as it is: a reader waiting for it to change
        (:meth:`~dataflow_operator.runtime.sources.reader.ChangelogReader.latestOffset`)
        answers Spark now, with nothing new."""
        document = self._document()
        if "time" in document:
            document["poke"] = int(document.get("poke", 0)) + 1
            self.location.write_text(json.dumps(document))

    @contextmanager
    def poking(self, every: float = POKE_PERIOD) -> Iterator[None]:
        """:meth:`poke` the clock ``every`` seconds while the block runs: Spark's wait for
        a query to have read everything (``processAllAvailable``) ends only at an answer
        with nothing new that comes after the wait began."""
        done = threading.Event()

        def keep_poking() -> None:
            while not done.wait(every):
                self.poke()

        poker = threading.Thread(target=keep_poking, name="clock-poke", daemon=True)
        poker.start()
        try:
            yield
        finally:
            done.set()
            poker.join()

    def read(self) -> Timestamp | None:
        """The current time, or ``None`` before the first batch."""
        document = self._document()
        try:
            return int(document["time"])
        except (ValueError, KeyError, TypeError):
            return None

    def round(self) -> int:
        """How many extra rounds were asked for so far (0 before any)."""
        try:
            return int(self._document().get("round", 0))
        except (ValueError, TypeError):
            return 0

    def _write(self, time: Timestamp, round_: int) -> None:
        self.location.write_text(json.dumps({"time": time, "round": round_}))

    def _document(self) -> dict[str, Any]:
        try:
            document = json.loads(self.location.read_text())
        except (OSError, ValueError):
            return {}
        return document if isinstance(document, dict) else {}


@dataclass(frozen=True, slots=True)
class TickPlan:
    """The times of the batches a run executes.

    Simulated: ``start``, ``start + tick``, … Wall: the wall clock at each tick (a batch
    starts ``tick`` after the one before, or at once when that one took longer), and
    earlier when ``wake`` names a time before the next tick (epoch ms: an update the
    dataflows hold falls due then, and comes out within a step of its time rather than
    after up to a tick more). With ``until`` the run ends once its output is complete up
    to ``until`` (the last batch runs at ``until - 1``); with ``batches`` after that many.
    """

    start: Timestamp
    tick: int
    simulated: bool = True
    until: Timestamp | None = None
    batches: int | None = None

    def times(self, wake: Callable[[], Timestamp | None] | None = None) -> Iterator[Timestamp]:
        """The batch times, in order; may be endless (no ``until`` and no ``batches``).
        ``wake``, asked before each wait on the wall clock: the time to wake at if it
        comes before the next tick (``None``: none; a time not after the last batch's is
        no reason to wake)."""
        count = 0
        previous: Timestamp | None = None
        began = wall.monotonic()
        while self.batches is None or count < self.batches:
            if self.simulated:
                now = self.start + count * self.tick
            else:
                if previous is not None:
                    deadline = began + self.tick / 1000
                    due = wake() if wake is not None else None
                    if due is not None and due > previous:  # a millisecond past it: read at once
                        at = wall.monotonic() + (due + 1) / 1000 - wall.time()
                        deadline = min(deadline, at)
                    wall.sleep(max(0.0, deadline - wall.monotonic()))
                began = wall.monotonic()
                now = max(int(wall.time() * 1000), (previous or -1) + 1)
            if self.until is not None and now >= self.until:
                if previous is None or previous < self.until - 1:
                    yield self.until - 1
                return
            yield now
            previous = now
            count += 1
