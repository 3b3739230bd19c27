"""A pod's processes (every process in its network namespace) and their memory.

Each pod has a network namespace of its own, so the processes of a pod are exactly
those whose ``/proc/PID/ns/net`` is that namespace, whatever they forked or re-parented
to. Memory is summed over them from ``smaps_rollup``: proportional set size (shared
pages split among their sharers), its anonymous part (what a memory cgroup charges for
the heap, stacks and Python objects), and resident set size.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Memory", "netns_inode", "pod_memory", "pod_processes"]

MIB = 2**20


def netns_inode(netns: str) -> int:
    """The inode of an ``ip netns`` namespace."""
    return os.stat(f"/run/netns/{netns}").st_ino


def pod_processes(inode: int) -> list[int]:
    """PIDs of the live processes in the network namespace ``inode``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.stat(entry / "ns" / "net").st_ino == inode:
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


@dataclass(frozen=True)
class Memory:
    """A pod's memory at one moment, in bytes."""

    pss: int = 0
    pss_anon: int = 0
    rss: int = 0

    def __str__(self) -> str:
        return (
            f"PSS {self.pss / MIB:.0f} MiB (anonymous {self.pss_anon / MIB:.0f}), "
            f"RSS {self.rss / MIB:.0f} MiB"
        )


def _rollup(pid: int) -> dict[str, int]:
    values = {}
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return {}
    for line in text.splitlines()[1:]:
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            values[key] = int(parts[0]) * 1024
    return values


def pod_memory(pids: list[int]) -> Memory:
    """The summed memory of ``pids``."""
    pss = pss_anon = rss = 0
    for pid in pids:
        rollup = _rollup(pid)
        pss += rollup.get("Pss", 0)
        pss_anon += rollup.get("Pss_Anon", 0)
        rss += rollup.get("Rss", 0)
    return Memory(pss, pss_anon, rss)
