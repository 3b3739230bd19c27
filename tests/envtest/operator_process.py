"""The project's operator as a local process on the node's network, as the chart's account.

It runs ``dataflow-operator operator -A --standalone`` (this tree's package) inside the
node's network namespace, so it reaches driver pods at their pod IPs and the API server
as the ``kubernetes`` Service (10.0.0.1:443), with a kubeconfig holding a token of the
chart's operator ServiceAccount: every request it makes is checked against the chart's
RBAC. Its environment is built from nothing: the venv's PATH, this tree, the settings.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
from pathlib import Path

from tests.envtest.image import ROOT
from tests.envtest.network import IP

__all__ = ["OperatorProcess"]

STOP_TIMEOUT_S = 15.0


class OperatorProcess:
    """``start()`` / ``stop()``; :meth:`output` for failure messages."""

    def __init__(self, netns: str, kubeconfig: Path, log: Path, **settings: str) -> None:
        self.netns = netns
        self.kubeconfig = kubeconfig
        self.log = log
        self.settings = settings
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {
            "PATH": f"{ROOT / '.venv' / 'bin'}:/usr/bin:/bin",
            "PYTHONPATH": str(ROOT / "operator"),
            "HOME": str(self.log.parent),
            "KUBECONFIG": str(self.kubeconfig),
            "DATAFLOW_LOG_FORMAT": "json",
            "DATAFLOW_METRICS_PORT": "0",
            **self.settings,
        }
        command = [IP, "netns", "exec", self.netns, "dataflow-operator", "operator", "-A",
                   "--standalone"]  # fmt: skip
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    async def stop(self) -> None:
        """SIGTERM; SIGKILL to its group after :data:`STOP_TIMEOUT_S`."""
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        for _ in range(int(STOP_TIMEOUT_S * 10)):
            if process.poll() is not None:
                return
            await asyncio.sleep(0.1)
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        process.wait(5)

    def output(self, tail: int = 6000) -> str:
        return self.log.read_text(errors="replace")[-tail:] if self.log.exists() else ""
