"""The kind suite: a real cluster, the chart, the image, the examples.

It needs Docker and kind. Where either is missing every test here is skipped with one
reason (pytest -ra shows it as one line); it never passes silently and never fails.
Set ``DATAFLOW_E2E_CLUSTER`` to reuse an existing kind cluster instead of creating one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
IMAGE = os.environ.get("DATAFLOW_E2E_IMAGE", "dataflow-operator:e2e")


def missing_prerequisite() -> str | None:
    """Why the kind suite cannot run here, or None when it can."""
    if shutil.which("kind") is None:
        return "e2e skipped: `kind` is not on PATH (the kind suite needs kind and a Docker engine)"
    if shutil.which("docker") is None:
        return "e2e skipped: `docker` is not on PATH (kind needs a Docker engine)"
    probe = subprocess.run(["docker", "info"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        return "e2e skipped: no Docker engine answers `docker info` (kind needs one)"
    for tool in ("kubectl", "helm"):
        if shutil.which(tool) is None and not (ROOT / ".venv/bin" / tool).exists():
            return f"e2e skipped: `{tool}` is not on PATH (run `python tools/install_k8s_tools.py .venv/bin`)"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip every e2e test with the one reason, when a prerequisite is missing; else
    run them all on one xdist worker, the one that creates the kind cluster."""
    reason = missing_prerequisite()
    marker = pytest.mark.skip(reason=reason) if reason else pytest.mark.xdist_group("kind")
    for item in items:
        if Path(str(item.fspath)).is_relative_to(ROOT / "e2e"):
            item.add_marker(marker)


def tool(name: str) -> str:
    """The path of kubectl/helm: PATH first, then .venv/bin."""
    found = shutil.which(name)
    return found or str(ROOT / ".venv/bin" / name)


def run(
    *command: str, timeout: float = 600, check: bool = True, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a command, returning its output; fail the test with its stderr on error."""
    result = subprocess.run(
        command, input=stdin, capture_output=True, text=True, timeout=timeout, check=False
    )
    if check and result.returncode != 0:
        pytest.fail(f"{' '.join(command)} exited {result.returncode}:\n{result.stderr}")
    return result


@pytest.fixture(scope="session")
def kind_cluster() -> Iterator[str]:
    """A kind cluster with the image loaded and the chart installed."""
    existing = os.environ.get("DATAFLOW_E2E_CLUSTER")
    name = existing or f"dataflow-e2e-{uuid.uuid4().hex[:6]}"
    if not existing:
        run("kind", "create", "cluster", "--name", name, "--wait", "120s")
    try:
        run("docker", "build", "-t", IMAGE, str(ROOT), timeout=1800)
        run("kind", "load", "docker-image", IMAGE, "--name", name)
        repository, tag = IMAGE.rsplit(":", 1)
        run(
            tool("helm"),
            "upgrade",
            "--install",
            "dataflow-operator",
            str(ROOT / "charts/dataflow-operator"),
            "--namespace",
            "dataflow-system",
            "--create-namespace",
            "--wait",
            "--timeout",
            "5m",
            "--set",
            f"image.repository={repository}",
            "--set",
            f"image.tag={tag}",
            "--set",
            "image.pullPolicy=Never",
            "--kube-context",
            f"kind-{name}",
        )
        yield f"kind-{name}"
    finally:
        if not existing:
            run("kind", "delete", "cluster", "--name", name, check=False)
