"""Where each source of a dataflow stands in the last batch Spark committed.

Spark's offset log holds, per batch, every source's offset as its reader returned it
(:mod:`dataflow_operator.runtime.sources.reader`); the commit log says which batches
finished. :func:`committed_offsets` reads the offsets of the last committed batch, by
the source's index in the spec: what the release, the resumption frontier and a kafka
source's consumer group go by.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dataflow_operator.core.kafka import positions_meet
from dataflow_operator.runtime.engine.layout import offsets_of
from dataflow_operator.runtime.sources.kafka import parse_positions
from dataflow_operator.runtime.storage import Location

__all__ = ["Committed", "committed_offsets"]


@dataclass(frozen=True, slots=True)
class Committed:
    """A source's offset in the last batch Spark committed."""

    seq: int
    """Files (or changelog files) read."""
    upper: int
    """Every update below this time is read."""
    listed: int = 0
    """Every file in the directory at this wall-clock time (epoch ms) is read."""
    positions: Mapping[int, int] = field(default_factory=dict)
    """A kafka source's positions (partition → next offset)."""
    highs: Mapping[int, int] = field(default_factory=dict)
    """A kafka source's high watermarks when that batch was fetched."""


def committed_offsets(checkpoint: Location) -> dict[int, Committed]:
    """Each source's offset (by index in the spec) in the last committed batch.

    A source read twice by one query has two offsets; their meet is what is committed.
    """
    batches = [int(name) for name in checkpoint.child("commits").list() if name.isdigit()]
    if not batches:
        return {}
    _, offsets = offsets_of(checkpoint, max(batches))
    found: dict[int, Committed] = {}
    for offset in offsets:
        if "source" not in offset or "seq" not in offset:
            continue
        index, seq, upper = int(offset["source"]), int(offset["seq"]), int(offset["upper"])
        listed = int(offset.get("listed", 0))
        nested: Mapping[str, Any] = offset
        positions = parse_positions(nested.get("partitions"))
        highs = parse_positions(nested.get("highs"))
        if index in found:
            seq, upper = min(seq, found[index].seq), min(upper, found[index].upper)
            listed = min(listed, found[index].listed)
            positions = positions_meet([positions, found[index].positions]) or {}
        found[index] = Committed(seq, upper, listed, positions, highs)
    return found
