"""A kafka source's batch read by the executors, waiting for the reader to take it up.

Before a step moves the clock, the engine has the executors read the next batch's offset
ranges (:mod:`.kafka_stage`); each task writes its records as a part of the source's
ingested collection, and the driver records the outcome here, in the source's logs
(:data:`STAGED_FILE`): from which offset it was read, for which clock time, and where it
left every partition. When the reader is asked for its latest offset at that time from
that same offset, it takes the batch up (:meth:`~.kafka.KafkaIngest.adopt`) instead of
fetching; otherwise it fetches itself, as without executors, and the staged parts go.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from dataflow_operator.core.kafka import PartitionRead
from dataflow_operator.runtime.storage import Location

__all__ = ["STAGED_FILE", "StagedBatch"]

STAGED_FILE = "kafka_staged.json"
"""In a kafka source's logs: the batch the executors read last (:class:`StagedBatch`)."""


@dataclass(frozen=True, slots=True)
class StagedBatch:
    """A batch read by the executors: what it was read from and what it reached.

    ``start_seq``, ``start_upper`` and ``start_positions`` are the offset it follows,
    ``base`` where the ingested collection ended, ``step`` the clock time it was read
    for, ``expiration`` the one its tasks stopped at (a run with another reads again),
    ``floor`` the time late records were advanced to; ``positions``, ``highs`` and
    ``reads`` what it reached (as :meth:`~.kafka.KafkaIngest.plan` and
    :func:`~dataflow_operator.core.kafka.merge_ranges` say), ``held`` the record held
    back at the expiration (partition, offset, time), ``readers`` how many executors
    read its ranges.
    """

    start_seq: int
    start_upper: int
    start_positions: dict[int, int]
    base: int
    step: int
    expiration: int
    floor: int
    positions: dict[int, int]
    highs: dict[int, int]
    reads: list[PartitionRead]
    held: tuple[int, int, int] | None
    readers: int = 0

    def follows(self, start: dict[str, Any], base: int, step: int, expiration: int) -> bool:
        """Whether this batch is the one after offset ``start`` at clock time ``step``,
        read with ``expiration``."""
        return (
            self.step == step
            and self.expiration == expiration
            and self.base == base
            and self.start_seq == int(start["seq"])
            and self.start_upper == int(start["upper"])
            and self.start_positions == _unkeyed(start.get("partitions") or {})
        )

    def write(self, logs: Location) -> None:
        """Record it in the source's logs (replacing the one before)."""
        body = {
            "start_seq": self.start_seq,
            "start_upper": self.start_upper,
            "start_positions": _keyed(self.start_positions),
            "base": self.base,
            "step": self.step,
            "expiration": self.expiration,
            "floor": self.floor,
            "positions": _keyed(self.positions),
            "highs": _keyed(self.highs),
            "reads": [[r.partition, r.end, r.high, r.newest] for r in self.reads],
            "held": list(self.held) if self.held is not None else None,
            "readers": self.readers,
        }
        logs.child(STAGED_FILE).write_text(json.dumps(body))

    @classmethod
    def read(cls, logs: Location) -> StagedBatch | None:
        """The batch recorded in the source's logs, if any."""
        text = logs.child(STAGED_FILE).read_text_or_none()
        if not text:
            return None
        body = json.loads(text)
        held = body["held"]
        return cls(
            start_seq=int(body["start_seq"]),
            start_upper=int(body["start_upper"]),
            start_positions=_unkeyed(body["start_positions"]),
            base=int(body["base"]),
            step=int(body["step"]),
            expiration=int(body["expiration"]),
            floor=int(body["floor"]),
            positions=_unkeyed(body["positions"]),
            highs=_unkeyed(body["highs"]),
            reads=[PartitionRead(int(p), int(e), int(h), n) for p, e, h, n in body["reads"]],
            held=(int(held[0]), int(held[1]), int(held[2])) if held else None,
            readers=int(body.get("readers", 0)),
        )

    @staticmethod
    def clear(logs: Location) -> None:
        """Forget the recorded batch (its parts are removed by the caller)."""
        staged = logs.child(STAGED_FILE)
        if staged.exists():
            staged.delete()


def _keyed(positions: dict[int, int]) -> dict[str, int]:
    return {str(p): o for p, o in sorted(positions.items())}


def _unkeyed(raw: dict[str, Any]) -> dict[int, int]:
    return {int(p): int(o) for p, o in raw.items()}
