"""Where a dataflow's runtime-owned files live in the replica's state location."""

from __future__ import annotations

import json
from dataclasses import dataclass

from dataflow_operator.runtime.storage import Location

__all__ = ["DataflowLayout", "last_batch", "last_offsets", "offsets_of"]


@dataclass(frozen=True, slots=True)
class DataflowLayout:
    """``<state>/dataflows/<name>/``: clock, checkpoint, source logs and changelog."""

    root: Location
    sink: Location | None = None

    @classmethod
    def of(cls, state: Location, name: str, sink: Location | None = None) -> DataflowLayout:
        """The layout of dataflow ``name``: always under ``state`` (raises
        :class:`~dataflow_operator.runtime.storage.UnsafePath` for a name that would not be)."""
        return cls(state.below("dataflows", name), sink)

    @property
    def clock(self) -> Location:
        """The clock file the dataflow's table and files sources read."""
        return self.root.child("clock.json")

    @property
    def checkpoint(self) -> Location:
        """Spark's checkpoint: offsets, commits, state."""
        return self.root.child("checkpoint")

    @property
    def changelog(self) -> Location:
        """The output changelog (the sink for a MaterializedView)."""
        return self.sink if self.sink is not None else self.root.child("changelog")

    @property
    def spec_file(self) -> Location:
        """The spec the checkpoint was made for."""
        return self.root.child("spec.json")

    def source_logs(self, source: str) -> Location:
        """A source's own logs (files consumed, ingestion times, commits); under the root."""
        return self.root.below("sources", source)

    def work(self, name: str) -> Location:
        """Working data of the dataflow's strategy (a recompute's history); under the root."""
        return self.root.below(name)


def offsets_of(checkpoint: Location, batch: int) -> tuple[dict[str, object], list[dict[str, int]]]:
    """Spark's offset log entry of one batch: its metadata and each source's offset."""
    lines = checkpoint.child("offsets", str(batch)).read_text().splitlines()
    metadata = json.loads(lines[1]) if len(lines) > 1 else {}
    sources = [json.loads(line) for line in lines[2:] if line.strip() and line.strip() != "-"]
    return metadata, sources


def last_batch(checkpoint: Location, log: str = "offsets") -> int | None:
    """The latest batch in one of Spark's checkpoint logs: ``offsets`` (planned: written
    as a batch starts) or ``commits`` (done); ``None`` when the log has none."""
    batches = [int(name) for name in checkpoint.child(log).list() if name.isdigit()]
    return max(batches, default=None)


def last_offsets(checkpoint: Location) -> tuple[dict[str, object], list[dict[str, int]]] | None:
    """The offset log entry of the latest batch, or ``None`` without a checkpoint."""
    batch = last_batch(checkpoint)
    return None if batch is None else offsets_of(checkpoint, batch)
