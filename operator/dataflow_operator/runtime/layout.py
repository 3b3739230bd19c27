"""Where a dataflow's runtime-owned files live under the replica's state directory."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DataflowLayout", "last_offsets", "offsets_of"]


@dataclass(frozen=True, slots=True)
class DataflowLayout:
    """``<state>/dataflows/<name>/``: clock, checkpoint, source logs and changelog."""

    root: Path
    sink: Path | None = None

    @classmethod
    def of(cls, state_dir: Path, name: str, sink: Path | None = None) -> DataflowLayout:
        """The layout of dataflow ``name``."""
        return cls(state_dir / "dataflows" / name, sink)

    @property
    def clock(self) -> Path:
        """The clock file the dataflow's table and files sources read."""
        return self.root / "clock.json"

    @property
    def checkpoint(self) -> Path:
        """Spark's checkpoint: offsets, commits, state."""
        return self.root / "checkpoint"

    @property
    def changelog(self) -> Path:
        """The output changelog (the sink for a MaterializedView)."""
        return self.sink if self.sink is not None else self.root / "changelog"

    @property
    def spec_file(self) -> Path:
        """The spec the checkpoint was made for."""
        return self.root / "spec.json"

    def source_logs(self, source: str) -> Path:
        """A source's own logs (files consumed, ingestion times, commits)."""
        return self.root / "sources" / source


def offsets_of(checkpoint: Path, batch: int) -> tuple[dict[str, object], list[dict[str, int]]]:
    """Spark's offset log entry of one batch: its metadata and each source's offset."""
    lines = (checkpoint / "offsets" / str(batch)).read_text(encoding="utf-8").splitlines()
    metadata = json.loads(lines[1]) if len(lines) > 1 else {}
    sources = [json.loads(line) for line in lines[2:] if line.strip() and line.strip() != "-"]
    return metadata, sources


def last_offsets(checkpoint: Path) -> tuple[dict[str, object], list[dict[str, int]]] | None:
    """The offset log entry of the latest batch, or ``None`` without a checkpoint."""
    directory = checkpoint / "offsets"
    if not directory.is_dir():
        return None
    batches = [int(p.name) for p in directory.iterdir() if p.name.isdigit()]
    return offsets_of(checkpoint, max(batches)) if batches else None
