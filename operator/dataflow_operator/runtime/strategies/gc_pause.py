"""Python's cyclic garbage collector paused while an operator handles a batch.

An operator's batch allocates a tuple or a dictionary per update, hundreds of thousands
of objects that live until the batch's output is handed over, and none of them in a
cycle: reference counting frees them all. The cyclic collector still runs every few
hundred allocations and, as the survivors pile up, walks them again and again (a
measurable share of the join processor's time: ``bench/RESULTS.md``). Pausing it for the
batch leaves the rare cycle to the next collection after it.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["cyclic_gc_paused"]


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Pause the cyclic collector for the block (if it ran before it); resume after."""
    running = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if running:
            gc.enable()
