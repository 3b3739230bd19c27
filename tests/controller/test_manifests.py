"""The driver Pod and Service as data, and against the Kubernetes schema."""

from __future__ import annotations

import json
from typing import Any

import kubernetes_validate
import pytest

from dataflow_operator.api import injection
from dataflow_operator.api.replica import Replica
from dataflow_operator.controller.config import OperatorConfig
from dataflow_operator.controller.manifests import (
    STATE_DIR,
    Attempt,
    attempt_host,
    build_attempts_service,
    build_driver_pod,
    build_driver_service,
    build_state_claim,
    control_address,
    driver_service_selector,
    driver_spec_hash,
    memory_to_spark,
)
from dataflow_operator.controller.naming import (
    attempts_service_name,
    driver_pod_name,
    driver_service_name,
    state_claim_name,
)
from dataflow_operator.core.durations import Duration

START = 1_767_225_600_000  # 2026-01-01T00:00:00Z
CONFIG = OperatorConfig(default_image="example/dataflow:1", default_expiration_offset=Duration(0))


def replica(**spec: Any) -> Replica:
    return Replica.model_validate(
        {
            "apiVersion": "dataflow.dev/v1alpha1",
            "kind": "Replica",
            "metadata": {"name": "r1", "namespace": "team", "uid": "uid-r1", "generation": 1},
            "spec": {"cluster": "default", **spec},
        }
    )


def pod_of(r: Replica, attempt: int = 1, config: OperatorConfig = CONFIG) -> dict[str, Any]:
    return build_driver_pod(r, config, Attempt(attempt, driver_pod_name("r1", attempt), START))


def env(pod: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}


def spark_conf(pod: dict[str, Any]) -> dict[str, str]:
    conf: dict[str, str] = json.loads(env(pod)[injection.ENV_SPARK_CONF])
    return conf


def test_pod_runs_the_replica_command_in_the_replica_image() -> None:
    pod = pod_of(replica(image="example/custom:2"))
    container = pod["spec"]["containers"][0]
    assert container["command"] == ["dataflow-operator", "replica"]
    assert container["image"] == "example/custom:2"
    assert pod["spec"]["restartPolicy"] == "Never"


def test_default_image_comes_from_the_operator_config() -> None:
    assert pod_of(replica())["spec"]["containers"][0]["image"] == "example/dataflow:1"


def test_pod_is_owned_by_the_replica_as_controller() -> None:
    (owner,) = pod_of(replica())["metadata"]["ownerReferences"]
    assert owner == {
        "apiVersion": "dataflow.dev/v1alpha1",
        "kind": "Replica",
        "name": "r1",
        "uid": "uid-r1",
        "controller": True,
        "blockOwnerDeletion": True,
    }


def test_labels_name_replica_cluster_and_attempt() -> None:
    labels = pod_of(replica(), attempt=3)["metadata"]["labels"]
    assert labels["dataflow.dev/replica"] == "r1"
    assert labels["dataflow.dev/cluster"] == "default"
    assert labels["dataflow.dev/attempt"] == "3"
    assert labels["app.kubernetes.io/managed-by"] == "dataflow-operator"
    assert labels["app.kubernetes.io/name"] == "dataflow-replica"


def test_start_time_and_offset_are_injected_as_env_and_spark_conf() -> None:
    pod = pod_of(replica(expirationOffset="21d"))
    variables = env(pod)
    assert variables[injection.ENV_START_TIME_MS] == str(START)
    assert variables[injection.ENV_START_TIME] == "2026-01-01T00:00:00.000Z"
    assert variables[injection.ENV_EXPIRATION_OFFSET] == "21d"
    conf = spark_conf(pod)
    assert conf[injection.CONF_START_TIME_MS] == str(START)
    assert conf[injection.CONF_EXPIRATION_OFFSET] == "21d"


def test_offset_defaults_to_the_operator_config_and_zero_disables() -> None:
    config = OperatorConfig(default_expiration_offset=Duration(3_600_000))
    assert env(pod_of(replica(), config=config))[injection.ENV_EXPIRATION_OFFSET] == "1h"
    assert (
        env(pod_of(replica(expirationOffset="0"), config=config))[injection.ENV_EXPIRATION_OFFSET]
        == "0"
    )


def test_executors_are_created_by_spark_in_the_namespace_owned_by_the_driver() -> None:
    conf = spark_conf(
        pod_of(replica(image="img:1", serviceAccountName="spark", executor={"instances": 3}))
    )
    assert conf["spark.master"] == "k8s://https://kubernetes.default.svc"
    assert conf["spark.kubernetes.namespace"] == "team"
    assert conf["spark.kubernetes.driver.pod.name"] == "r1-driver-1"
    assert conf["spark.kubernetes.container.image"] == "img:1"
    assert conf["spark.kubernetes.authenticate.driver.serviceAccountName"] == "spark"
    assert conf["spark.executor.instances"] == "3"
    # each attempt has its own name, so a successor's executors never reach its predecessor
    assert conf["spark.driver.host"] == "driver-1.r1-attempts.team.svc"
    assert conf["spark.kubernetes.executor.label.dataflow.dev/replica"] == "r1"


def test_resources_convert_quantities_to_spark_units() -> None:
    pod = pod_of(
        replica(driver={"cores": 2, "memory": "2Gi"}, executor={"memory": "512Mi", "instances": 1})
    )
    conf = spark_conf(pod)
    assert conf["spark.driver.memory"] == "2048m"
    assert conf["spark.driver.cores"] == "2"
    assert conf["spark.executor.memory"] == "512m"
    resources = pod["spec"]["containers"][0]["resources"]
    assert resources["requests"]["cpu"] == "2"
    assert resources["limits"]["memory"] == "2868Mi"  # heap + 40 % overhead


@pytest.mark.parametrize(
    ("quantity", "spark"),
    [("1Gi", "1024m"), ("512Mi", "512m"), ("1G", "954m"), ("1500M", "1431m"), ("1Ki", "1m")],
)
def test_memory_to_spark(quantity: str, spark: str) -> None:
    assert memory_to_spark(quantity) == spark


def test_user_spark_conf_cannot_override_the_injected_values() -> None:
    conf = spark_conf(
        pod_of(
            replica(
                executor={"instances": 1},
                sparkConf={
                    "spark.sql.shuffle.partitions": "7",
                    "spark.dataflow.replica.startTimeMs": "1",
                    "spark.kubernetes.driver.pod.name": "other",
                },
            )
        )
    )
    assert conf["spark.sql.shuffle.partitions"] == "7"
    assert conf[injection.CONF_START_TIME_MS] == str(START)
    assert conf["spark.kubernetes.driver.pod.name"] == "r1-driver-1"


def test_the_driver_service_selects_the_serving_attempt_only() -> None:
    service = build_driver_service(replica(), CONFIG, 3)
    assert service["metadata"]["name"] == "r1-driver"
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"] == {
        "dataflow.dev/replica": "r1",
        "dataflow.dev/role": "driver",
        "dataflow.dev/attempt": "3",
    }
    assert service["spec"]["selector"] == driver_service_selector(replica(), 3)
    assert service["metadata"]["ownerReferences"][0]["controller"] is True


def test_every_attempt_has_its_own_dns_name_through_the_attempts_service() -> None:
    service = build_attempts_service(replica(), CONFIG)
    assert service["metadata"]["name"] == "r1-attempts"
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True  # a successor still starting
    assert service["spec"]["selector"] == {
        "dataflow.dev/replica": "r1",
        "dataflow.dev/role": "driver",
    }
    pod = pod_of(replica())
    # hostname.subdomain is the pod's DNS name under that Service: driver-1.r1-attempts
    assert (pod["spec"]["hostname"], pod["spec"]["subdomain"]) == ("driver-1", "r1-attempts")
    assert attempt_host(replica(), 1) == "driver-1.r1-attempts.team.svc"


@pytest.mark.parametrize("build", ["pod", "service", "attempts-service", "claim", "pod-with-claim"])
def test_built_objects_pass_the_kubernetes_schema(build: str) -> None:
    storage = {"size": "10Gi", "storageClassName": "fast", "accessModes": ["ReadWriteOncePod"]}
    r = replica(
        storage=storage if "claim" in build else None,
        image="img:1",
        imagePullPolicy="Always",
        serviceAccountName="spark",
        driver={"memory": "1Gi", "memoryOverhead": "512Mi"},
        env=[
            {"name": "A", "value": "1"},
            {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        ],
    )
    objects = {
        "pod": pod_of,
        "pod-with-claim": pod_of,
        "service": lambda r: build_driver_service(r, CONFIG, 1),
        "attempts-service": lambda r: build_attempts_service(r, CONFIG),
        "claim": build_state_claim,
    }
    obj = objects[build](r)
    assert obj is not None
    kubernetes_validate.validate(obj, "1.30", strict=True)


def test_long_names_stay_within_kubernetes_limits() -> None:
    long = "r" * 200
    assert len(driver_service_name(long)) <= 63
    assert driver_service_name(long)[0].isalpha()
    assert len(attempts_service_name(long)) <= 63
    assert attempts_service_name(long) != driver_service_name(long)
    assert len(driver_pod_name(long, 12)) <= 253
    assert driver_service_name("1abc").startswith("df-")
    assert len(state_claim_name(long + long)) <= 253
    assert state_claim_name(long + long).endswith("-state")


def test_spec_hash_ignores_restart_policy_but_not_image_or_conf() -> None:
    base = driver_spec_hash(replica(), CONFIG)
    assert driver_spec_hash(replica(restartPolicy={"type": "Never"}), CONFIG) == base
    assert driver_spec_hash(replica(image="x:2"), CONFIG) != base
    assert driver_spec_hash(replica(sparkConf={"spark.a": "1"}), CONFIG) != base
    assert driver_spec_hash(replica(driver={"memory": "2Gi"}), CONFIG) != base


def test_an_attempt_is_addressed_by_its_pod_ip_else_its_name_unless_overridden() -> None:
    assert control_address(replica(), 8765, 2, "10.0.0.7") == "http://10.0.0.7:8765"
    assert control_address(replica(), 8765, 2, "fd00::7") == "http://[fd00::7]:8765"
    assert control_address(replica(), 8765, 2, None) == "http://driver-2.r1-attempts.team.svc:8765"
    overridden = replica().model_copy(
        update={
            "metadata": replica().metadata.model_copy(
                update={"annotations": {"dataflow.dev/control-address": "127.0.0.1:9999"}}
            )
        }
    )
    assert control_address(overridden, 8765, 2, "10.0.0.7") == "http://127.0.0.1:9999"


def mounts(pod: dict[str, Any]) -> dict[str, str]:
    return {m["name"]: m["mountPath"] for m in pod["spec"]["containers"][0]["volumeMounts"]}


def volumes(pod: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {v.pop("name"): v for v in json.loads(json.dumps(pod["spec"]["volumes"]))}


def test_without_storage_the_state_dir_is_an_empty_dir_and_no_claim_is_built() -> None:
    r = replica(executor={"instances": 0})
    pod = pod_of(r)
    assert build_state_claim(r) is None
    assert env(pod)[injection.ENV_STATE_URI] == "file:///opt/dataflow/state"
    assert injection.ENV_STATE_DIR not in env(pod)
    assert mounts(pod) == {"state": STATE_DIR, "control-token": "/var/run/dataflow/control"}
    assert volumes(pod)["state"] == {"emptyDir": {}}
    assert "securityContext" not in pod["spec"]


def test_with_storage_every_attempt_mounts_the_one_claim_at_the_state_dir() -> None:
    r = replica(storage={"size": "10Gi"})
    for attempt in (1, 2):
        pod = pod_of(r, attempt=attempt)
        assert env(pod)[injection.ENV_STATE_URI] == "file:///opt/dataflow/state"
        assert mounts(pod)["state"] == STATE_DIR
        assert volumes(pod)["state"] == {"persistentVolumeClaim": {"claimName": "r1-state"}}
        assert pod["spec"]["securityContext"]["fsGroup"] == 185


def test_a_successor_keeps_its_own_state_and_names_its_predecessors() -> None:
    r = replica(stateUri="s3a://bucket/team/r1")
    successor = Attempt(4, "r1-driver-4", START, state_dir="attempts/4", keep_state_dir="")
    pod = build_driver_pod(r, CONFIG, successor)
    assert env(pod)[injection.ENV_STATE_URI] == "s3a://bucket/team/r1/attempts/4"
    assert env(pod)[injection.ENV_STATE_KEEP] == ""
    plain = pod_of(r)
    assert env(plain)[injection.ENV_STATE_URI] == "s3a://bucket/team/r1"
    assert injection.ENV_STATE_KEEP not in env(plain)


def test_user_env_cannot_move_the_state_location() -> None:
    pod = pod_of(replica(env=[{"name": injection.ENV_STATE_URI, "value": "/tmp/x"}]))
    values = [e for e in pod["spec"]["containers"][0]["env"] if e["name"] == "DATAFLOW_STATE_URI"]
    assert values == [{"name": "DATAFLOW_STATE_URI", "value": "file:///opt/dataflow/state"}]


def test_state_claim_is_owned_by_the_replica_and_labelled_like_the_driver() -> None:
    claim = build_state_claim(replica(storage={"size": "10Gi"}))
    assert claim is not None
    assert claim["kind"] == "PersistentVolumeClaim"
    assert (claim["metadata"]["name"], claim["metadata"]["namespace"]) == ("r1-state", "team")
    (owner,) = claim["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("Replica", "uid-r1", True)
    labels = claim["metadata"]["labels"]
    assert labels["dataflow.dev/replica"] == "r1"
    assert labels["dataflow.dev/cluster"] == "default"
    assert labels["dataflow.dev/role"] == "state"
    assert claim["spec"] == {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "10Gi"}},
        "volumeMode": "Filesystem",
    }  # no storageClassName: the cluster's default class


def test_state_claim_takes_class_and_access_modes_from_the_spec() -> None:
    claim = build_state_claim(
        replica(
            storage={"size": "1Gi", "storageClassName": "ssd", "accessModes": ["ReadWriteMany"]}
        )
    )
    assert claim is not None
    assert claim["spec"]["storageClassName"] == "ssd"
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]


def test_storage_in_the_spec_hash_only_when_set_and_not_its_size() -> None:
    base = driver_spec_hash(replica(), CONFIG)
    with_claim = driver_spec_hash(replica(storage={"size": "10Gi"}), CONFIG)
    assert with_claim != base  # adding (or removing) the claim needs a new pod
    assert driver_spec_hash(replica(storage={"size": "20Gi"}), CONFIG) == with_claim


def test_storage_size_must_be_a_quantity() -> None:
    with pytest.raises(ValueError, match="quantity"):
        replica(storage={"size": "lots"})
    with pytest.raises(ValueError, match=r"accessModes|access_modes"):
        replica(storage={"size": "1Gi", "accessModes": []})
