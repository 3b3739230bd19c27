"""Fixtures on a real kube-apiserver + etcd (one per test session) and a test kubelet.

The binaries come from ``KUBEBUILDER_ASSETS``, the shared ``../shared/envtest`` folder or
where it unpacked them (:func:`find_assets`); where none holds them every test here is
skipped with one line. Every test is marked
``envtest``, which ``tools/test_lanes.py`` runs in its one-process lane (one API server a
run), and starts from a clean ``default`` namespace. The control plane's logs are kept (and their folder printed) when a test
here failed.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.envtest.api import Api
from tests.envtest.bootstrap import bootstrap
from tests.envtest.cluster import NAMESPACES, EnvCluster, clean_namespace
from tests.envtest.control_plane import ControlPlane, find_assets
from tests.envtest.controllers import ClaimBinder, GarbageCollector
from tests.envtest.image import Image
from tests.envtest.kubelet import TestKubelet

IMAGE = "dataflow-operator:envtest"
"""The name the tests give the project's image (:class:`Image` from the Dockerfile)."""
_FAILED = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    report = yield
    if report.failed and Path(__file__).parent in item.path.parents:
        item.session.stash[_FAILED] = True
    return report


@pytest.fixture(scope="session")
def env_cluster(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[EnvCluster]:
    """etcd + kube-apiserver for the session, bootstrapped; stopped at its end."""
    assets = find_assets()
    if assets is None:
        pytest.skip(
            "no kube-apiserver: set KUBEBUILDER_ASSETS, or run ../shared/envtest/install once"
        )
    workdir = tmp_path_factory.mktemp("envtest")
    plane = ControlPlane(assets, workdir / "control-plane")
    try:
        plane.start()
        admin = bootstrap(plane, workdir, NAMESPACES)
        yield EnvCluster(plane, workdir, admin)
    finally:
        plane.stop()
        if request.session.stash.get(_FAILED, False):
            print(f"\nenvtest: control-plane logs kept in {plane.workdir}")
        else:
            shutil.rmtree(plane.workdir / "etcd", ignore_errors=True)


@pytest_asyncio.fixture()
async def admin(env_cluster: EnvCluster) -> AsyncIterator[Api]:
    """The admin's client; the ``default`` namespace is cleaned before the test."""
    async with env_cluster.admin() as api:
        await clean_namespace(api, "default")
        yield api


@pytest_asyncio.fixture()
async def garbage_collector(admin: Api) -> AsyncIterator[GarbageCollector]:
    """The controller-manager's garbage collector, running through the test."""
    collector = GarbageCollector(admin)
    task = asyncio.create_task(collector.run())
    yield collector
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


@pytest_asyncio.fixture()
async def kubelet(
    env_cluster: EnvCluster, admin: Api, garbage_collector: GarbageCollector, tmp_path: Path
) -> AsyncIterator[TestKubelet]:
    """A node running pods (the project's image as ``IMAGE``), and a claim binder."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("the test kubelet needs root and unshare (network and mount namespaces)")
    images = {IMAGE: Image.from_dockerfile()}
    binder = ClaimBinder(admin)
    async with TestKubelet(admin, env_cluster.plane.port, tmp_path / "node", images) as node:
        task = asyncio.create_task(binder.run())
        yield node
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
