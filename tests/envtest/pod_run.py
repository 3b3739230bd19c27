"""One pod running on the test node: its containers as processes in its namespaces.

Each container is ``ip netns exec <pod> unshare --mount --uts --propagation private
python pod_init.py <spec>``: the pod's network namespace, a mount namespace of its own
(its volumes bind-mounted, ``/etc/hosts`` the pod's), its hostname; ``pod_init`` then
execs the container's command with its environment and nothing else. Stopping follows
a node: SIGTERM to each container's first process, then SIGKILL to every process left
in the pod once the grace period is over.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.envtest.memory import Memory, netns_inode, pod_memory, pod_processes
from tests.envtest.network import IP, PodNetwork
from tests.envtest.volumes import Mount

__all__ = ["ContainerRun", "PodRun", "now_rfc3339"]

POD_INIT = Path(__file__).with_name("pod_init.py")
UNSHARE = shutil.which("unshare") or "/usr/bin/unshare"


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class ContainerRun:
    """One container's process and how it ended."""

    name: str
    image: str
    log: Path
    process: subprocess.Popen[bytes]
    started_at: str = field(default_factory=now_rfc3339)
    ready: bool = False
    exit_code: int | None = None
    reason: str = ""
    finished_at: str = ""

    def poll(self) -> int | None:
        """The exit code once it ended (a signal ``n`` is ``128 + n``, as on a node)."""
        if self.exit_code is None and (code := self.process.poll()) is not None:
            self.exit_code = 128 - code if code < 0 else code
            self.reason = self.reason or ("Completed" if self.exit_code == 0 else "Error")
            self.finished_at = now_rfc3339()
        return self.exit_code

    def state(self) -> dict[str, Any]:
        if self.exit_code is None:
            return {"running": {"startedAt": self.started_at}}
        terminated = {
            "exitCode": self.exit_code,
            "reason": self.reason,
            "startedAt": self.started_at,
            "finishedAt": self.finished_at,
        }
        if self.reason != "Completed":
            terminated["message"] = self.last_line()
        return {"terminated": terminated}

    def last_line(self) -> str:
        """The last line of its output (a short reason for a failure)."""
        try:
            lines = self.log.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return lines[-1][:300] if lines else ""


@dataclass
class PodRun:
    """A pod's processes, network and directory on this node."""

    pod: dict[str, Any]
    network: PodNetwork
    directory: Path
    containers: list[ContainerRun] = field(default_factory=list)
    peak: Memory = field(default_factory=Memory)
    stopping: bool = False

    @property
    def uid(self) -> str:
        return str(self.pod["metadata"]["uid"])

    @property
    def hosts(self) -> Path:
        return self.directory / "hosts"

    def launch(
        self, name: str, image: str, argv: list[str], env: dict[str, str], mounts: list[Mount],
        workdir: str,
    ) -> None:  # fmt: skip
        """Start one container."""
        spec = {
            "argv": argv,
            "env": env,
            "workdir": workdir,
            "hostname": (self.pod["spec"].get("hostname") or self.pod["metadata"]["name"])[:63],
            "upper": str(self.directory / "rootfs" / name),
            "mounts": [
                {"source": m.source, "target": m.target, "readOnly": m.read_only} for m in mounts
            ]
            + [{"source": str(self.hosts), "target": "/etc/hosts", "readOnly": False}],
        }
        spec_file = self.directory / f"{name}.json"
        spec_file.write_text(json.dumps(spec))
        log = self.directory / f"{name}.log"
        command = [
            IP, "netns", "exec", self.network.netns,
            UNSHARE, "--mount", "--uts", "--propagation", "private",
            sys.executable, str(POD_INIT), str(spec_file),
        ]  # fmt: skip
        with log.open("ab") as out:
            process = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, env={}, start_new_session=True
            )
        self.containers.append(ContainerRun(name, image, log, process))

    def write_hosts(self, content: str) -> None:
        """Rewrite ``/etc/hosts`` in place (the bind mounts see the same file)."""
        if not self.hosts.exists() or self.hosts.read_text() != content:
            with self.hosts.open("w") as out:
                out.write(content)

    def pids(self) -> list[int]:
        try:
            return pod_processes(netns_inode(self.network.netns))
        except OSError:
            return []

    def sample_memory(self) -> Memory:
        """The pod's memory now; the peak (by anonymous PSS) is kept."""
        now = pod_memory(self.pids())
        if now.pss_anon > self.peak.pss_anon:
            self.peak = now
        return now

    def finished(self) -> bool:
        return all(c.poll() is not None for c in self.containers)

    def terminate(self) -> None:
        """SIGTERM to every container's first process."""
        self.stopping = True
        for container in self.containers:
            if container.poll() is None:
                container.process.send_signal(signal.SIGTERM)

    def kill(self, reason: str | None = None) -> None:
        """SIGKILL to every process of the pod; ``reason`` names it on running containers."""
        for container in self.containers:
            if reason and container.poll() is None:
                container.reason = reason
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while not self.finished() and time.monotonic() < deadline:
            time.sleep(0.05)
