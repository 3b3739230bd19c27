"""The operator's kmock scenarios again, on a real API server, as the chart's account.

kmock validates nothing against the CRDs' schemas, ignores label selectors, sets no
``generation``, does not isolate the status subresource and knows no RBAC: a status
field the schema prunes, a selector that matches too much, an ``observedGeneration``
that never moves or a request the chart's ClusterRole does not grant passes there and
fails here. The scenarios are the very functions of ``tests/controller``; only their
fixtures change: the operator authenticates with a token of the chart's ServiceAccount,
objects are created without the ``uid``/``resourceVersion`` kmock needs (the server sets
them), and no kubelet runs (the scenarios play it through pod status, as on kmock).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from dataflow_operator.controller.kube import KubeApi
from tests.controller import test_operator_control_token as token_scenarios
from tests.controller import test_operator_kmock as kmock_scenarios
from tests.controller import test_operator_storage as storage_scenarios
from tests.controller.conftest import FAST
from tests.controller.harness import Cluster, FakeReplica, Operator
from tests.envtest.api import Api
from tests.envtest.bootstrap import CHART_NAMESPACE, OPERATOR_ACCOUNT
from tests.envtest.cluster import EnvCluster, clean_namespace

pytestmark = [pytest.mark.envtest, pytest.mark.slow, pytest.mark.asyncio, pytest.mark.timeout(180)]

SERVER_SET = ("uid", "resourceVersion", "generation", "creationTimestamp")


class ServerSetsMetadata(KubeApi):
    """The operator's client, creating objects without what only a server may set."""

    async def create(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        metadata = {k: v for k, v in body["metadata"].items() if k not in SERVER_SET}
        return await super().create(path, {**body, "metadata": metadata})


@pytest_asyncio.fixture()
async def cluster(
    env_cluster: EnvCluster, admin: Api, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Cluster]:
    """The scenarios' view of the cluster, as the admin; ``default`` starts empty."""
    await clean_namespace(admin, "operator-probe")
    monkeypatch.setenv("KUBECONFIG", str(env_cluster.admin_kubeconfig))
    api = await ServerSetsMetadata.connect()
    try:
        yield Cluster(api)
    finally:
        await api.close()


@pytest_asyncio.fixture()
async def start_operator(
    env_cluster: EnvCluster, cluster: Cluster, tmp_path: Path
) -> AsyncIterator[Callable[..., Awaitable[Operator]]]:
    """Start the operator (extra settings by name) as the chart's ServiceAccount."""
    kubeconfig = await env_cluster.kubeconfig_for(CHART_NAMESPACE, OPERATOR_ACCOUNT)
    started: list[Operator] = []

    async def start(*args: str, **config: str) -> Operator:
        operator = Operator(kubeconfig, tmp_path / "operator.log", args=args, **{**FAST, **config})
        await operator.start()
        started.append(operator)
        await operator.wait_ready(cluster.api, timeout=90)
        return operator

    yield start
    for operator in started:
        await operator.stop()


SCENARIOS = [
    kmock_scenarios.test_driver_pod_carries_the_injected_start_time_and_offset,
    kmock_scenarios.test_ready_replica_installs_dataflows_and_reports_hydration,
    kmock_scenarios.test_invalid_dataflow_gets_the_exact_timeline_message_and_is_never_sent,
    kmock_scenarios.test_crash_loop_backs_off_then_ends_degraded,
    kmock_scenarios.test_image_that_never_pulls_ends_degraded_with_its_reason,
    kmock_scenarios.test_expiration_restarts_at_the_lead_time_and_on_the_expired_exit_code,
    kmock_scenarios.test_operator_killed_mid_restart_converges_to_exactly_one_driver,
    kmock_scenarios.test_delete_waits_for_the_replica_then_times_out_with_an_event,
    kmock_scenarios.test_new_replica_gets_every_dataflow_and_a_deleted_one_leaves_status,
    storage_scenarios.test_the_claim_exists_before_the_driver_that_mounts_it,
    storage_scenarios.test_a_claim_left_by_a_crash_is_reused_and_a_shrink_is_rejected,
    token_scenarios.test_the_driver_mounts_the_replicas_token_and_every_request_carries_it,
    token_scenarios.test_a_token_left_by_a_crash_is_kept_and_used,
    token_scenarios.test_executors_on_read_write_once_storage_are_refused_before_any_pod,
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda f: f.__name__.removeprefix("test_"))
async def test_kmock_scenario_on_a_real_api_server(
    scenario: Callable[..., Awaitable[None]],
    cluster: Cluster,
    start_operator: Callable[..., Awaitable[Operator]],
    fake_replica: FakeReplica,
    operator_log: Callable[[], str],
) -> None:
    fixtures = {
        "cluster": cluster,
        "start_operator": start_operator,
        "fake_replica": fake_replica,
        "operator_log": operator_log,
    }
    wanted = scenario.__code__.co_varnames[: scenario.__code__.co_argcount]
    try:
        await scenario(**{name: fixtures[name] for name in wanted})
    except AssertionError as error:
        raise AssertionError(f"{error}\n--- operator ---\n{operator_log()[-5000:]}") from None
