"""How a replica's engine runs: its state location, its start and its expiration."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dataflow_operator.core.durations import Duration
from dataflow_operator.core.expiration import replica_expiration
from dataflow_operator.core.time import Timestamp, format_timestamp
from dataflow_operator.runtime.storage import Location

__all__ = ["EngineConfig", "expired_message"]


def expired_message(now: Timestamp, expiration: Timestamp) -> str:
    """The exact line the runtime prints when it stops at its expiration."""
    return (
        f"replica expired. now: {now} ({format_timestamp(now)}), "
        f"expiration: {expiration} ({format_timestamp(expiration)})"
    )


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """How the replica runs: where its state lives, when it started, when it expires."""

    state_dir: Location | Path | str
    """The replica's state location: a path, ``file://`` or object-store URI."""
    start_time: Timestamp
    expiration_offset: Duration | None = None
    state_partitions: int = 2
    """Partitions of a new dataflow's state (a checkpoint keeps the number it began with)."""
    release_upstream: bool = False
    """Release consumed source files (``cleanSource``): only a replica that is its own
    cluster may (a local run); see :mod:`.release`."""
    reset: frozenset[str] = frozenset()
    """Dataflows whose output may start over on state made for another spec (``--reset``):
    the old output is not retracted. Without it only a desired dataflow with a
    ``generation`` (an edited Kubernetes object) may; see :meth:`.Engine.apply`."""

    @property
    def expiration(self) -> Timestamp | None:
        """The replica's expiration (``None``: never)."""
        return replica_expiration(self.start_time, self.expiration_offset)

    @property
    def state(self) -> Location:
        """The state location, every pod of the replica reaches it."""
        return Location.of(self.state_dir)
