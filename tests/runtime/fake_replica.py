"""An in-memory ReplicaService for control API tests: no Spark, changelogs on disk."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

from dataflow_operator.api.dataflow import DataflowKindField
from dataflow_operator.api.protocol import (
    DataflowReport,
    DesiredDataflows,
    InstallResult,
    PeekResult,
    ReleaseFrontiers,
    ReplicaPhase,
    ReplicaReport,
)
from dataflow_operator.runtime.changelog_store import DIFF, TIME, ChangelogStore
from dataflow_operator.runtime.service import Changelog, NotAnIndex, UnknownDataflow


class FakeReplica:
    """Keeps the desired set in memory; peeks return one row per Index; each dataflow's
    changelog is a store under ``root`` that tests write to."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.installed: dict[str, DesiredDataflows] = {}
        self.specs: dict[str, Any] = {}
        self.stores: dict[str, ChangelogStore] = {}
        self.listeners: list[Callable[[str], None]] = []
        self.applied = threading.Event()

    def report(self) -> ReplicaReport:
        return ReplicaReport(
            start_time=1000,
            expiration=5000,
            phase=ReplicaPhase.RUNNING,
            dataflows=[
                DataflowReport(name=name, frontier=[2000], hydrated=True, state_rows=3)
                for name in sorted(self.specs)
            ],
        )

    def apply(self, desired: DesiredDataflows) -> InstallResult:
        result = InstallResult()
        wanted = {d.name: d for d in desired.dataflows}
        for name in sorted(set(self.specs) - set(wanted)):
            del self.specs[name]
            result.dropped.append(name)
        for name, flow in wanted.items():
            if name not in self.specs:
                result.installed.append(name)
            elif self.specs[name] != flow.spec:
                result.reinstalled.append(name)
            else:
                result.unchanged.append(name)
            self.specs[name] = flow.spec
        self.applied.set()
        return result

    def peek(self, name: str) -> PeekResult:
        if name not in self.specs:
            raise UnknownDataflow(f"no dataflow {name!r}")
        if self.specs[name].kind is not DataflowKindField.INDEX:
            raise NotAnIndex(f"{name!r} is not an Index")
        return PeekResult(name=name, time=1999, columns=["x"], rows=[[1, 1]])

    def ready(self) -> bool:
        return self.applied.is_set()

    def changelog(self, name: str) -> Changelog:
        if name not in self.specs:
            raise UnknownDataflow(f"no dataflow {name!r}")
        store = self.stores.setdefault(name, ChangelogStore(self.root / name))
        return Changelog(store, self.specs[name].kind)

    def add_batch_listener(self, listener: Callable[[str], None]) -> None:
        self.listeners.append(listener)

    def release(self, frontiers: ReleaseFrontiers) -> None:
        self.released = frontiers

    def write(self, name: str, batch: int, updates: list[tuple[str, int, int]], upper: int) -> None:
        """One batch of ``(x, time, diff)`` updates into the dataflow's store, then notify."""
        table = pa.table(
            {
                "x": pa.array([u[0] for u in updates], pa.string()),
                TIME: pa.array([u[1] for u in updates], pa.int64()),
                DIFF: pa.array([u[2] for u in updates], pa.int64()),
            }
        )
        self.changelog(name).store.write(batch, table, upper)
        self.completed(name)

    def completed(self, name: str) -> None:
        """As the engine does after a step: tell the listeners."""
        for listener in self.listeners:
            listener(name)
