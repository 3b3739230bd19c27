"""etcd and kube-apiserver on free loopback ports, RBAC on, token authentication.

Where the binaries are: ``KUBEBUILDER_ASSETS`` (controller-runtime's convention), else
the shared folder ``../shared/envtest`` beside the repository, whose ``install`` unpacks
them and prints their folder, else a folder that install (or ``setup-envtest``) already
unpacked them into — so a checkout anywhere else on the machine finds them too.
:func:`find_assets` returns ``None`` where none of these holds them.
"""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["ADMIN_TOKEN", "SERVICE_CIDR", "ControlPlane", "find_assets"]

ROOT = Path(__file__).resolve().parents[2]
SHARED_INSTALL = ROOT.parent / "shared" / "envtest" / "install"
BINARIES = ("etcd", "kube-apiserver")
ADMIN_TOKEN = "envtest-admin-token"
SERVICE_CIDR = "10.0.0.0/24"
"""Service cluster IPs; the ``kubernetes`` Service is its first address, 10.0.0.1."""
READY_TIMEOUT_S = 90.0


def find_assets() -> Path | None:
    """The folder holding ``etcd`` and ``kube-apiserver``, or ``None``."""
    given = os.environ.get("KUBEBUILDER_ASSETS")
    if given:
        return Path(given)
    if SHARED_INSTALL.is_file():
        out = subprocess.run(
            [str(SHARED_INSTALL)], check=True, capture_output=True, text=True
        ).stdout
        return Path(out.strip().splitlines()[-1])
    return next((folder for folder in unpacked_folders() if _holds_binaries(folder)), None)


def unpacked_folders() -> list[Path]:
    """Where the binaries are unpacked by default: the shared install's cache folder, then
    ``setup-envtest``'s store (its versions' folders, the last name first)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    data = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    store = sorted((data / "kubebuilder-envtest" / "k8s").glob("*"), reverse=True)
    return [cache / "dataflow-envtest", *store]


def _holds_binaries(folder: Path) -> bool:
    return all(os.access(folder / name, os.X_OK) for name in BINARIES)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class ControlPlane:
    """One etcd and one API server in ``workdir``; :meth:`start`, then :meth:`stop`."""

    assets: Path
    workdir: Path
    port: int = 0
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def ca_file(self) -> Path:
        """The API server's self-signed serving certificate (its own CA)."""
        return self.workdir / "certs" / "apiserver.crt"

    @property
    def logs(self) -> list[Path]:
        return [self.workdir / "etcd.log", self.workdir / "kube-apiserver.log"]

    def start(self) -> None:
        """Start both and wait until ``/readyz`` answers ok."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        etcd_port, peer_port = _free_port(), _free_port()
        self.port = _free_port()
        etcd_url, peer_url = f"http://127.0.0.1:{etcd_port}", f"http://127.0.0.1:{peer_port}"
        self._spawn(
            "etcd",
            "--data-dir", str(self.workdir / "etcd"),
            "--listen-client-urls", etcd_url, "--advertise-client-urls", etcd_url,
            "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
            "--initial-cluster", f"default={peer_url}", "--unsafe-no-fsync",
        )  # fmt: skip
        key, public = self.workdir / "sa.key", self.workdir / "sa.pub"
        subprocess.run(
            ["openssl", "genrsa", "-out", str(key), "2048"], check=True, capture_output=True
        )
        subprocess.run(
            ["openssl", "rsa", "-in", str(key), "-pubout", "-out", str(public)],
            check=True,
            capture_output=True,
        )
        tokens = self.workdir / "tokens.csv"
        tokens.write_text(f'{ADMIN_TOKEN},admin,admin-uid,"system:masters"\n')
        self._spawn(
            "kube-apiserver",
            f"--etcd-servers={etcd_url}", "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1", f"--secure-port={self.port}",
            f"--cert-dir={self.workdir / 'certs'}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={public}",
            f"--service-account-signing-key-file={key}",
            f"--token-auth-file={tokens}", "--authorization-mode=RBAC",
            f"--service-cluster-ip-range={SERVICE_CIDR}", "--endpoint-reconciler-type=none",
        )  # fmt: skip
        self._wait_ready()

    def _spawn(self, binary: str, *args: str) -> None:
        with (self.workdir / f"{binary}.log").open("ab") as log:
            self.processes.append(
                subprocess.Popen(
                    [str(self.assets / binary), *args],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                    start_new_session=True,
                )
            )

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        last = ""
        while time.monotonic() < deadline:
            for process in self.processes:
                if process.poll() is not None:
                    raise RuntimeError(f"{process.args[0]} exited: {self.tail()}")
            if self.ca_file.exists():
                try:
                    context = ssl.create_default_context(cafile=str(self.ca_file))
                    request = urllib.request.Request(
                        f"{self.url}/readyz", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
                    )
                    with urllib.request.urlopen(request, context=context, timeout=5) as answer:
                        if answer.read() == b"ok":
                            return
                except OSError as error:
                    last = str(error)
            time.sleep(0.5)
        raise RuntimeError(
            f"the API server was not ready in {READY_TIMEOUT_S}s ({last}): {self.tail()}"
        )

    def tail(self, lines: int = 30) -> str:
        """The last lines of both logs."""
        parts = []
        for log in self.logs:
            text = log.read_text(errors="replace").splitlines() if log.exists() else []
            parts.append(f"--- {log.name} ---\n" + "\n".join(text[-lines:]))
        return "\n".join(parts)

    def stop(self, keep_logs_in: Path | None = None) -> None:
        """Stop the API server, then etcd; copy the logs to ``keep_logs_in`` if given."""
        for process in reversed(self.processes):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(15)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(5)
        self.processes.clear()
        if keep_logs_in is not None:
            keep_logs_in.mkdir(parents=True, exist_ok=True)
            for log in self.logs:
                if log.exists():
                    shutil.copy(log, keep_logs_in / log.name)
