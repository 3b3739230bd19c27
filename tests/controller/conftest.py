"""Fixtures for the operator against the kmock emulator."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import kmock
import pytest_asyncio

from dataflow_operator.controller.kube import KubeApi
from tests.controller.harness import (
    Cluster,
    Emulator,
    Operator,
    declare_resources,
    write_kubeconfig,
)

FAST = {
    "DATAFLOW_STATUS_POLL_INTERVAL": "300ms",
    "DATAFLOW_RECONCILE_INTERVAL": "1s",
    "DATAFLOW_LOST_GRACE": "1s",
    "DATAFLOW_DELETE_TIMEOUT": "3s",
    "DATAFLOW_REPLICA_IMAGE": "example/dataflow:test",
}


@pytest_asyncio.fixture()
async def emulator(tmp_path: Path) -> AsyncIterator[tuple[kmock.KubernetesEmulator, Path]]:
    async with Emulator() as handler, kmock.Server(handler) as server:
        declare_resources(handler)
        yield handler, write_kubeconfig(tmp_path / "kubeconfig", str(server.url).rstrip("/"))


@pytest_asyncio.fixture()
async def cluster(emulator: tuple[kmock.KubernetesEmulator, Path]) -> AsyncIterator[Cluster]:
    _, kubeconfig = emulator
    import os

    previous = os.environ.get("KUBECONFIG")
    os.environ["KUBECONFIG"] = str(kubeconfig)
    api = await KubeApi.connect()
    try:
        yield Cluster(api)
    finally:
        await api.close()
        if previous is None:
            os.environ.pop("KUBECONFIG", None)
        else:
            os.environ["KUBECONFIG"] = previous


@pytest_asyncio.fixture()
async def start_operator(
    emulator: tuple[kmock.KubernetesEmulator, Path], cluster: Cluster, tmp_path: Path
) -> AsyncIterator[Callable[..., Any]]:
    """Start the operator (extra config as env names); all are stopped at the end."""
    _, kubeconfig = emulator
    started: list[Operator] = []

    async def start(*args: str, **config: str) -> Operator:
        operator = Operator(kubeconfig, tmp_path / "operator.log", args=args, **{**FAST, **config})
        await operator.start()
        started.append(operator)
        await operator.wait_ready(cluster.api)
        return operator

    yield start
    for operator in started:
        await operator.stop()
