"""Dropping dataflows (design 2): at once for Spark, in the background for the rest.

A drop drops the dataflow's token (its jobs are cancelled and its sources see the
marker) and returns; a thread of its own then stops the query and waits for its last
task. Until then the dataflow is reported as ``dropping``; how long each took goes
into the shutdown histogram.
"""

from __future__ import annotations

import threading
import time as wall

from dataflow_operator.logs import get_logger
from dataflow_operator.runtime.engine.running import RunningDataflow
from dataflow_operator.runtime.engine.shutdowns import ShutdownHistogram
from dataflow_operator.runtime.errors import one_line

__all__ = ["Drops"]

log = get_logger(__name__)


class Drops:
    """The dataflows being dropped, and how long their drops took."""

    def __init__(self) -> None:
        self.shutdowns = ShutdownHistogram()
        self._lock = threading.Lock()
        self._dropping: dict[str, tuple[RunningDataflow, threading.Event]] = {}

    def drop(self, running: RunningDataflow) -> None:
        """Drop ``running`` at once (token, marker, jobs); stop the rest in the background."""
        running.token.drop()  # at once; its jobs are cancelled once its query is stopping
        done = threading.Event()
        with self._lock:
            self._dropping[running.name] = (running, done)
        threading.Thread(
            target=self._stop, args=(running, done), name=f"drop-{running.name}", daemon=True
        ).start()

    def dropping(self) -> dict[str, RunningDataflow]:
        """The dataflows whose work is still stopping, by name."""
        with self._lock:
            return {name: running for name, (running, _) in self._dropping.items()}

    def await_gone(self, name: str) -> None:
        """Wait until dataflow ``name``'s earlier run has stopped (it shares the checkpoint)."""
        with self._lock:
            dropping = self._dropping.get(name)
        if dropping is not None:
            dropping[1].wait()

    def await_all(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for every drop to end."""
        with self._lock:
            waiting = [done for _, done in self._dropping.values()]
        deadline = wall.monotonic() + timeout
        for done in waiting:
            done.wait(max(0.0, deadline - wall.monotonic()))

    def _stop(self, running: RunningDataflow, done: threading.Event) -> None:
        name = running.name
        try:
            complete = running.stop()
        except Exception as error:  # never leave it "dropping" forever
            complete = False
            log.debug("stop", dataflow=name, error=one_line(error))
        dropped_at = running.token.dropped_at or wall.monotonic()
        seconds = wall.monotonic() - dropped_at
        self.shutdowns.observe(seconds)
        # logged before the drop is done: whoever waits for it (a closing engine, then
        # its process's end) finds the line written
        if complete:
            log.info("dataflow dropped", dataflow=name, seconds=round(seconds, 3))
        else:
            log.warning("dataflow dropped; some of its tasks outlived the wait", dataflow=name)
        with self._lock:
            if self._dropping.get(name, (None,))[0] is running:
                del self._dropping[name]
        done.set()
