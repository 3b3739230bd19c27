"""The dataflows' own output changelogs, compacted.

A runtime-owned output changelog (not a MaterializedView's ``sink.path``, which is the
user's) keeps its last :data:`KEEP_BATCHES` batches as they were written; those before
become one consolidated snapshot, never past what a downstream dataflow reading the
changelog has committed (:func:`downstream_positions`), and only once rewriting the
snapshot pays (:meth:`ChangelogStore.compaction_pays`: an output that keeps growing
rewrites it when it has grown by a share of it).
"""

from __future__ import annotations

from collections.abc import Sequence

from dataflow_operator.api.dataflow import DataflowSpec
from dataflow_operator.runtime.changelog_store import ChangelogStore
from dataflow_operator.runtime.engine.committed import committed_offsets
from dataflow_operator.runtime.engine.layout import DataflowLayout

__all__ = ["COMPACT_EVERY", "KEEP_BATCHES", "compact_output", "downstream_positions"]

KEEP_BATCHES = 100
"""Batches of an output changelog kept as they were written (as Spark keeps its logs):
a subscriber that lags less than that resumes exactly."""
COMPACT_EVERY = 16
"""Batches an output changelog's compaction waits for (each rewrites the snapshot)."""


def compact_output(
    store: ChangelogStore, downstream: Sequence[int], *, keep: int = KEEP_BATCHES
) -> int | None:
    """Compact ``store`` up to ``keep`` batches before its last, and not past any of the
    ``downstream`` readers' committed batches; the batch compacted up to, or ``None``.

    The snapshot's time is the newest time it holds: every reader positioned past the
    compacted batches has seen all of them, and a restart replays them below its
    watermark.
    """
    recorded = store.read_upper()
    if recorded is None:
        return None
    upto = min([recorded.batch - keep, *downstream])
    files = store.parts(-1, upto)
    base = files[0][0] if files and files[0][1].name.startswith("snapshot-") else -1
    if upto - base < COMPACT_EVERY or len(files) < 2 or not store.compaction_pays(upto):
        return None
    return upto if store.compact(upto) else None


def downstream_positions(
    installed: Sequence[tuple[DataflowSpec, DataflowLayout]], upstream: str
) -> list[int]:
    """The batches of ``upstream``'s changelog each dataflow reading it has committed."""
    positions = []
    for spec, layout in installed:
        for index, source in enumerate(spec.sources):
            if source.dataflow is not None and source.dataflow.name == upstream:
                committed = committed_offsets(layout.checkpoint).get(index)
                positions.append(-1 if committed is None else committed.seq)
    return positions
