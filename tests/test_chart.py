"""The Helm chart lints, renders, and renders only objects valid for Kubernetes."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "charts/dataflow-operator"
HELM = ROOT / ".venv/bin/helm"
KUBERNETES_VERSION = "1.30.0"

pytestmark = pytest.mark.skipif(
    not HELM.exists(),
    reason="helm is not installed: run `python tools/install_k8s_tools.py .venv/bin`",
)


def helm(*args: str, tmp_path: Path) -> str:
    env = {
        **os.environ,
        "HELM_CACHE_HOME": str(tmp_path / "cache"),
        "HELM_CONFIG_HOME": str(tmp_path / "config"),
        "HELM_DATA_HOME": str(tmp_path / "data"),
    }
    result = subprocess.run(
        [str(HELM), *args], capture_output=True, text=True, env=env, check=False
    )
    assert result.returncode == 0, result.stderr + result.stdout
    return result.stdout


def render(tmp_path: Path, *sets: str) -> list[dict[str, Any]]:
    flags = [arg for value in sets for arg in ("--set", value)]
    text = helm(
        "template",
        "dfo",
        str(CHART),
        "--namespace",
        "ops",
        "--include-crds",
        *flags,
        tmp_path=tmp_path,
    )
    return [doc for doc in yaml.safe_load_all(text) if doc]


def test_chart_lints(tmp_path: Path) -> None:
    helm("lint", "--strict", str(CHART), tmp_path=tmp_path)


@pytest.mark.parametrize(
    "sets",
    [
        (),
        (
            "operator.watchNamespaces={a,b}",
            "operator.peering.enabled=true",
            "metrics.serviceMonitor.enabled=true",
        ),
        (
            "rbac.create=false",
            "serviceAccount.create=false",
            "replicas.serviceAccount.create=false",
        ),
        ("replicaCount=2", "networkPolicy.monitoring.podSelector.matchLabels.app=prometheus"),
        ("replicaCount=2", "operator.watchNamespaces={a,b}", "networkPolicy.enabled=false"),
    ],
)
@pytest.mark.slow
def test_rendered_objects_are_valid_kubernetes(tmp_path: Path, sets: tuple[str, ...]) -> None:
    objects = render(tmp_path, *sets)
    assert objects
    for obj in objects:
        if obj["apiVersion"].startswith(("monitoring.coreos.com", "kopf.dev")):
            continue  # prometheus-operator's and kopf's CRDs are not part of the Kubernetes schema
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_chart_ships_the_generated_crds(tmp_path: Path) -> None:
    crds = {
        obj["metadata"]["name"]
        for obj in render(tmp_path)
        if obj["kind"] == "CustomResourceDefinition"
    }
    assert crds == {"dataflows.dataflow.dev", "replicas.dataflow.dev"}


def test_deployment_sets_only_settings_the_operator_reads(tmp_path: Path) -> None:
    from dataflow_operator.controller.config import ENV_NAMES

    (deployment,) = [obj for obj in render(tmp_path) if obj["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    names = {env["name"] for env in container["env"]}
    logging_settings = {"DATAFLOW_LOG_FORMAT", "DATAFLOW_LOG_LEVEL"}
    assert names - logging_settings <= set(ENV_NAMES.values())
    assert "DATAFLOW_DEFAULT_EXPIRATION_OFFSET" in names
    assert container["args"][:3] == ["operator", "--all-namespaces", "--standalone"]


def test_operator_role_manages_the_replicas_state_claims(tmp_path: Path) -> None:
    (role,) = [
        obj
        for obj in render(tmp_path)
        if obj["kind"] == "ClusterRole" and not obj["metadata"]["name"].endswith("-replica")
    ]
    verbs = {
        verb
        for rule in role["rules"]
        if "" in rule["apiGroups"] and "persistentvolumeclaims" in rule["resources"]
        for verb in rule["verbs"]
    }
    assert {"get", "list", "watch", "create", "delete", "patch"} <= verbs


def _only(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [obj for obj in objects if obj["kind"] == kind]
    return found


def test_two_operator_pods_peer_and_the_chart_creates_the_peering_object(tmp_path: Path) -> None:
    objects = render(tmp_path, "replicaCount=2")
    deployment = _only(objects, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert "--peering=dataflow-operator" in container["args"]
    assert "--standalone" not in container["args"]
    peering = _only(objects, "ClusterKopfPeering")  # the operator runs with --all-namespaces
    assert peering["metadata"]["name"] == "dataflow-operator"
    crds = {o["metadata"]["name"] for o in objects if o["kind"] == "CustomResourceDefinition"}
    assert "clusterkopfpeerings.kopf.dev" in crds

    namespaced = render(tmp_path, "replicaCount=2", "operator.watchNamespaces={a,b}")
    peerings = [o for o in namespaced if o["kind"] == "KopfPeering"]
    assert sorted(p["metadata"]["namespace"] for p in peerings) == ["a", "b"]
    assert not [o for o in namespaced if o["kind"] == "ClusterKopfPeering"]


def test_one_operator_pod_runs_standalone(tmp_path: Path) -> None:
    objects = render(tmp_path)
    assert _only(objects, "Deployment")["spec"]["replicas"] == 1
    assert not [o for o in objects if o["apiVersion"].startswith("kopf.dev")]


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    return selector["matchLabels"].items() <= labels.items()


def test_network_policies_match_what_the_operator_builds(tmp_path: Path) -> None:
    from dataflow_operator.api.replica import Replica
    from dataflow_operator.controller.config import OperatorConfig
    from dataflow_operator.controller.manifests import Attempt, build_driver_pod, spark_conf

    replica = Replica.model_validate(
        {
            "metadata": {"name": "r1", "namespace": "ops", "uid": "u"},
            "spec": {"cluster": "c", "executor": {"instances": 1}, "stateUri": "s3a://b/r1"},
        }
    )
    attempt = Attempt(1, "r1-driver-1", 0)
    driver = build_driver_pod(replica, OperatorConfig(), attempt)
    driver_ports = {p["name"] for p in driver["spec"]["containers"][0]["ports"]}
    prefix = "spark.kubernetes.executor.label."
    conf = spark_conf(
        replica, OperatorConfig(), attempt, OperatorConfig().default_expiration_offset
    )
    executor_labels = {k.removeprefix(prefix): v for k, v in conf.items() if k.startswith(prefix)}

    objects = render(tmp_path)
    deployment = _only(objects, "Deployment")
    operator_labels = deployment["spec"]["template"]["metadata"]["labels"]
    operator_ports = {
        p["name"] for p in deployment["spec"]["template"]["spec"]["containers"][0]["ports"]
    }
    policies = {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "NetworkPolicy"}
    drivers = policies["dfo-dataflow-operator-replica-drivers"]
    assert _selects(drivers["podSelector"], driver["metadata"]["labels"])
    assert not _selects(drivers["podSelector"], executor_labels)
    operator_rule, monitoring_rule, executor_rule = drivers["ingress"]
    assert _selects(operator_rule["from"][0]["podSelector"], operator_labels)
    assert operator_rule["from"][0]["namespaceSelector"]["matchLabels"] == {
        "kubernetes.io/metadata.name": "ops"
    }
    assert monitoring_rule["from"][0]["namespaceSelector"]["matchLabels"] == {
        "kubernetes.io/metadata.name": "monitoring"
    }
    assert _selects(executor_rule["from"][0]["podSelector"], executor_labels)
    rule_ports = {p["port"] for rule in drivers["ingress"] for p in rule["ports"]}
    assert rule_ports == {"control", "spark-driver", "block-manager"}
    assert rule_ports <= driver_ports  # named ports the driver pod really has

    with_ui = render(tmp_path, "networkPolicy.sparkUiFrom[0].ipBlock.cidr=10.0.0.1/32")
    ui_rule = next(
        o for o in with_ui if o["metadata"]["name"] == "dfo-dataflow-operator-replica-drivers"
    )["spec"]["ingress"][-1]
    assert ui_rule == {
        "from": [{"ipBlock": {"cidr": "10.0.0.1/32"}}],
        "ports": [{"port": "spark-ui", "protocol": "TCP"}],
    }
    assert "spark-ui" in driver_ports

    own = policies["dfo-dataflow-operator"]
    assert _selects(own["podSelector"], operator_labels)
    assert {p["port"] for rule in own["ingress"] for p in rule["ports"]} == operator_ports
    assert not [
        o for o in render(tmp_path, "networkPolicy.enabled=false") if o["kind"] == "NetworkPolicy"
    ]


def test_driver_account_and_its_binding_exist_wherever_replicas_run(tmp_path: Path) -> None:
    for sets, namespaces in [
        ((), {"ops", "default"}),
        (("operator.watchNamespaces={a,b}", "replicaNamespaces={team}"), {"ops", "a", "b", "team"}),
    ]:
        objects = render(tmp_path, *sets)
        accounts = {
            obj["metadata"]["namespace"]
            for obj in objects
            if obj["kind"] == "ServiceAccount" and obj["metadata"]["name"] == "dataflow-replica"
        }
        bindings = [obj for obj in objects if obj["kind"] == "RoleBinding"]
        assert accounts == namespaces
        assert {b["metadata"]["namespace"] for b in bindings} == namespaces
        for binding in bindings:
            (subject,) = binding["subjects"]
            assert subject["namespace"] == binding["metadata"]["namespace"]
            assert subject["name"] == "dataflow-replica"
            assert binding["roleRef"] == {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "dfo-dataflow-operator-replica",
            }
        (role,) = [
            o
            for o in objects
            if o["kind"] == "ClusterRole" and o["metadata"]["name"].endswith("-replica")
        ]
        resources = {r for rule in role["rules"] for r in rule["resources"]}
        assert {"pods", "services", "configmaps", "persistentvolumeclaims"} <= resources


def test_operator_role_creates_and_reads_the_control_token_secrets(tmp_path: Path) -> None:
    (role,) = [
        obj
        for obj in render(tmp_path)
        if obj["kind"] == "ClusterRole" and not obj["metadata"]["name"].endswith("-replica")
    ]
    verbs = {
        verb
        for rule in role["rules"]
        if "" in rule["apiGroups"] and "secrets" in rule["resources"]
        for verb in rule["verbs"]
    }
    assert {"get", "create"} <= verbs
