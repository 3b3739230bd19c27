"""Executors as data: the state location, the executor pod template, local mode, the token.

Every built object is also checked against the Kubernetes schema.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from pydantic import ValidationError

from dataflow_operator.api import injection
from dataflow_operator.api.replica import Replica
from dataflow_operator.api.replica_rules import replica_problems
from dataflow_operator.controller.config import OperatorConfig
from dataflow_operator.controller.manifests import (
    CONTROL_TOKEN_FILE,
    STATE_DIR,
    Attempt,
    build_attempts_service,
    build_control_token_secret,
    build_driver_pod,
    build_driver_service,
    driver_spec_hash,
)
from dataflow_operator.controller.manifests.sizing import (
    SIZES,
    driver_memory,
    executor_memory,
    sizing_table,
)
from dataflow_operator.controller.naming import EXECUTOR_CONTAINER

CONFIG = OperatorConfig(default_image="example/dataflow:1")
START = 1_767_225_600_000
K8S = "1.30"
RWX = {"size": "10Gi", "accessModes": ["ReadWriteMany"], "storageClassName": "nfs"}
URI = "s3a://bucket/replicas/r1"
EXTRA_VOLUME = {"name": "inputs", "configMap": {"name": "inputs"}}
EXTRA_MOUNT = {"name": "inputs", "mountPath": "/data/inputs", "readOnly": True}
ENV = [
    {"name": "A", "value": "1"},
    {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
]


def replica(**spec: Any) -> Replica:
    return Replica.model_validate(
        {
            "apiVersion": "dataflow.dev/v1alpha1",
            "kind": "Replica",
            "metadata": {"name": "r1", "namespace": "team", "uid": "uid-r1"},
            "spec": {"cluster": "default", **spec},
        }
    )


def driver(r: Replica) -> dict[str, Any]:
    return build_driver_pod(r, CONFIG, Attempt(1, "r1-driver-1", START))


def env(pod: dict[str, Any]) -> dict[str, Any]:
    return {
        e["name"]: e.get("value", e.get("valueFrom")) for e in pod["spec"]["containers"][0]["env"]
    }


def template(pod: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(env(pod)[injection.ENV_EXECUTOR_POD_TEMPLATE])
    return result


def conf(pod: dict[str, Any]) -> dict[str, str]:
    result: dict[str, str] = json.loads(env(pod)[injection.ENV_SPARK_CONF])
    return result


def container(pod: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = pod["spec"]["containers"][0]
    return result


def volume_names(pod: dict[str, Any]) -> list[str]:
    return [v["name"] for v in pod["spec"].get("volumes", [])]


def mounts(pod: dict[str, Any]) -> dict[str, str]:
    return {m["name"]: m["mountPath"] for m in container(pod).get("volumeMounts", [])}


def test_rwx_claim_is_mounted_on_the_driver_and_every_executor_at_the_same_path() -> None:
    r = replica(storage=RWX, executor={"instances": 2}, env=ENV)
    pod = driver(r)
    executor = template(pod)
    for each in (pod, executor):
        claim = next(v for v in each["spec"]["volumes"] if v["name"] == "state")
        assert claim["persistentVolumeClaim"] == {"claimName": "r1-state"}
        assert mounts(each)["state"] == STATE_DIR
        assert env(each)[injection.ENV_STATE_URI] == f"file://{STATE_DIR}"
        assert each["spec"]["securityContext"]["fsGroup"] == 185
    assert replica_problems(r.spec) == []
    kubernetes_validate.validate(pod, K8S, strict=True)
    kubernetes_validate.validate(executor, K8S, strict=True)


def test_object_store_uri_with_credentials_reaches_driver_and_executors() -> None:
    r = replica(stateUri=URI, stateCredentials="minio", executor={"instances": 2})
    pod = driver(r)
    executor = template(pod)
    for each in (pod, executor):
        assert env(each)[injection.ENV_STATE_URI] == URI
        assert container(each)["envFrom"] == [{"secretRef": {"name": "minio"}}]
        assert "state" not in volume_names(each)
        assert "state" not in mounts(each)
    assert replica_problems(r.spec) == []
    kubernetes_validate.validate(pod, K8S, strict=True)
    kubernetes_validate.validate(executor, K8S, strict=True)


def test_extra_volumes_and_env_with_value_from_go_on_driver_and_executors() -> None:
    r = replica(
        stateUri=URI,
        executor={"instances": 1},
        volumes=[EXTRA_VOLUME],
        volumeMounts=[EXTRA_MOUNT],
        env=ENV,
    )
    pod = driver(r)
    executor = template(pod)
    for each in (pod, executor):
        assert next(v for v in each["spec"]["volumes"] if v["name"] == "inputs") == EXTRA_VOLUME
        assert mounts(each)["inputs"] == "/data/inputs"
        assert env(each)["A"] == "1"
        assert env(each)["POD_IP"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    assert replica_problems(r.spec) == []
    kubernetes_validate.validate(executor, K8S, strict=True)


def test_template_is_picked_by_name_and_leaves_ownership_to_spark() -> None:
    pod = driver(replica(stateUri=URI, executor={"instances": 3}, sparkConf={
        "spark.kubernetes.executor.podTemplateContainerName": "other",
    }))  # fmt: skip
    executor, settings = template(pod), conf(pod)
    assert [c["name"] for c in executor["spec"]["containers"]] == [EXECUTOR_CONTAINER]
    assert settings["spark.kubernetes.executor.podTemplateContainerName"] == EXECUTOR_CONTAINER
    # Spark makes the driver pod the executors' controller owner; a second controller
    # reference would make the API server reject every executor
    assert settings["spark.kubernetes.driver.pod.name"] == "r1-driver-1"
    assert "ownerReferences" not in executor["metadata"]
    assert executor["metadata"]["labels"]["dataflow.dev/replica"] == "r1"
    assert executor["metadata"]["labels"]["dataflow.dev/role"] == "executor"
    assert settings["spark.master"] == "k8s://https://kubernetes.default.svc"
    assert env(pod)[injection.ENV_SPARK_MASTER] == settings["spark.master"]
    assert settings["spark.executor.instances"] == "3"
    assert not [k for k in settings if k.startswith("spark.executorEnv.")]  # in the template


def test_template_stays_compact() -> None:
    pod = driver(replica(stateUri=URI, executor={"instances": 1}, env=ENV))
    raw = env(pod)[injection.ENV_EXECUTOR_POD_TEMPLATE]
    assert ": " not in raw and ", " not in raw
    assert len(raw) < 2_000


@pytest.mark.parametrize(("cores", "master"), [(1, "local[1]"), (3, "local[3]")])
def test_no_executors_runs_spark_locally_in_the_driver(cores: int, master: str) -> None:
    pod = driver(replica(executor={"instances": 0}, driver={"cores": cores}))
    settings = conf(pod)
    assert env(pod)[injection.ENV_SPARK_MASTER] == master
    assert settings["spark.master"] == master
    assert injection.ENV_EXECUTOR_POD_TEMPLATE not in env(pod)
    assert not [k for k in settings if k.startswith(("spark.kubernetes.", "spark.executor."))]
    assert "spark.driver.host" not in settings
    assert settings["spark.driver.cores"] == str(cores)
    kubernetes_validate.validate(pod, K8S, strict=True)


def test_driver_mounts_the_control_token_read_only() -> None:
    pod = driver(replica(executor={"instances": 0}))
    assert env(pod)[injection.ENV_CONTROL_TOKEN_FILE] == CONTROL_TOKEN_FILE
    assert CONTROL_TOKEN_FILE == "/var/run/dataflow/control/token"
    (mount,) = [m for m in container(pod)["volumeMounts"] if m["name"] == "control-token"]
    assert mount == {
        "name": "control-token",
        "mountPath": "/var/run/dataflow/control",
        "readOnly": True,
    }
    (volume,) = [v for v in pod["spec"]["volumes"] if v["name"] == "control-token"]
    assert volume["secret"]["secretName"] == "r1-control-token"
    executors = replica(stateUri=URI, executor={"instances": 1})
    assert "control-token" not in json.dumps(template(driver(executors)))


def test_control_token_secret_is_owned_by_the_replica() -> None:
    secret = build_control_token_secret(replica(), "s3cr3t")
    assert secret["metadata"]["name"] == "r1-control-token"
    assert secret["metadata"]["namespace"] == "team"
    (owner,) = secret["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("Replica", "uid-r1", True)
    assert base64.b64decode(secret["data"]["token"]) == b"s3cr3t"
    kubernetes_validate.validate(secret, K8S, strict=True)


def test_state_location_changes_restart_the_driver() -> None:
    base = driver_spec_hash(replica(stateUri=URI), CONFIG)
    assert driver_spec_hash(replica(stateUri="s3a://bucket/other"), CONFIG) != base
    assert driver_spec_hash(replica(stateUri=URI, stateCredentials="s"), CONFIG) != base
    assert driver_spec_hash(replica(stateUri=URI, volumes=[EXTRA_VOLUME]), CONFIG) != base


def problems(**spec: Any) -> list[str]:
    return [str(p) for p in replica_problems(replica(**spec).spec)]


def test_executors_on_read_write_once_storage_are_refused() -> None:
    (problem,) = problems(storage={"size": "1Gi"}, executor={"instances": 2})
    assert problem.startswith("spec.storage.accessModes: [ReadWriteOnce] lacks ReadWriteMany")
    assert "executors run in other pods" in problem
    assert problems(storage={"size": "1Gi"}, executor={"instances": 0}) == []


def test_executors_on_an_empty_dir_are_refused() -> None:
    (problem,) = problems(executor={"instances": 1})
    assert problem.startswith("spec.executor.instances: executor.instances is 1 but neither")
    assert "emptyDir" in problem
    assert problems(executor={"instances": 0}) == []


def test_storage_and_state_uri_are_exclusive() -> None:
    (problem,) = problems(storage=RWX, stateUri=URI, executor={"instances": 0})
    assert problem.startswith(
        "spec.stateUri: spec.storage and spec.stateUri are mutually exclusive"
    )


def test_volume_names_and_mounts_are_checked() -> None:
    found = problems(
        executor={"instances": 0},
        volumes=[{"name": "state", "emptyDir": {}}, EXTRA_VOLUME, EXTRA_VOLUME],
        volumeMounts=[{"name": "nope", "mountPath": "/x"}, {"name": "inputs"}],
    )
    assert found == [
        "spec.volumes[0].name: 'state' is the operator's own volume; choose another name",
        "spec.volumes[2].name: 'inputs' twice",
        "spec.volumeMounts[0].name: no volume 'nope' in spec.volumes",
        "spec.volumeMounts[1].mountPath: required field is missing",
    ]


def test_oversized_extras_are_refused() -> None:
    env = [{"name": f"V{i}", "value": "x" * 1000} for i in range(80)]
    (problem,) = problems(executor={"instances": 0}, env=env)
    assert problem.startswith("spec.volumes: env, volumes and volumeMounts take")


@pytest.mark.parametrize(
    "uri",
    [
        "s3a://bucket/prefix",
        "s3a://bucket",
        "gs://b/p/q",
        "hdfs://namenode:8020/replicas/r1",
        "abfss://state@account.dfs.core.windows.net/r1",
    ],
)
def test_state_uri_accepts_object_stores_and_hdfs(uri: str) -> None:
    assert replica(stateUri=uri).spec.state_uri == uri


@pytest.mark.parametrize(
    ("uri", "why"),
    [
        ("/opt/state", "not an object-store or HDFS URI"),
        ("file:///opt/state", "not an object-store or HDFS URI"),
        ("s3://bucket/p", "not an object-store or HDFS URI"),
        ("s3a:///prefix", "not an object-store or HDFS URI"),
        ("s3a://bucket/a b", "not an object-store or HDFS URI"),
        ("abfss://account.dfs.core.windows.net/p", "CONTAINER@ACCOUNT"),
    ],
)
def test_state_uri_rejects_other_forms_naming_the_field(uri: str, why: str) -> None:
    with pytest.raises(ValidationError) as error:
        replica(stateUri=uri)
    (item,) = error.value.errors()
    assert item["loc"] == ("spec", "stateUri")
    assert why in item["msg"]


def address_executors_dial(settings: dict[str, str]) -> str:
    """The driver address Spark hands executors (BasicExecutorFeatureStep, Spark 4.x):
    the bind address while spark.kubernetes.executor.useDriverPodIP is true (the default
    from 4.1), else spark.driver.host."""
    if settings.get("spark.kubernetes.executor.useDriverPodIP", "true") == "true":
        return settings["spark.driver.bindAddress"]
    return settings["spark.driver.host"]


@pytest.mark.parametrize("user", [{}, {"spark.kubernetes.executor.useDriverPodIP": "true"}])
def test_executors_dial_the_attempts_dns_name_not_the_bind_address(user: dict[str, str]) -> None:
    settings = conf(driver(replica(stateUri=URI, executor={"instances": 2}, sparkConf=user)))
    assert settings["spark.driver.bindAddress"] == "0.0.0.0"
    assert address_executors_dial(settings) == "driver-1.r1-attempts.team.svc"


MEASURED_EXECUTOR_USE_MIB = 973
"""The most an executor with a 512Mi heap and 1 core used on a real node (JVM and Python
workers, issue 34: 931-973 MiB over five runs)."""


def spark_executor_pod_mib(settings: dict[str, str]) -> int:
    """The memory Spark gives an executor pod of a PySpark application in client mode
    (BasicExecutorFeatureStep): heap + overhead, the overhead given or
    max(384, factor x heap) with the JVM factor 0.1."""
    heap = int(settings["spark.executor.memory"].removesuffix("m"))
    if "spark.executor.memoryOverhead" in settings:
        overhead = int(settings["spark.executor.memoryOverhead"].removesuffix("m"))
    else:
        factor = float(settings.get("spark.executor.memoryOverheadFactor", "0.1"))
        overhead = max(384, int(factor * heap))
    return heap + overhead


def test_executor_pods_have_room_for_their_python_workers() -> None:
    settings = conf(driver(replica(stateUri=URI, executor={"instances": 2, "memory": "512Mi"})))
    assert spark_executor_pod_mib(settings) > MEASURED_EXECUTOR_USE_MIB


@pytest.mark.parametrize(
    ("executor", "pod_mib"),
    [
        ({"memory": "512Mi"}, 512 + 384 + 384),
        ({"memory": "8Gi", "cores": 4}, 8192 + 820 + 4 * 384),
        ({"memory": "1Gi", "memoryOverhead": "1Gi"}, 2048),  # given: taken as it is
    ],
)
def test_executor_pod_memory_is_what_the_sizing_says(
    executor: dict[str, Any], pod_mib: int
) -> None:
    r = replica(stateUri=URI, executor={"instances": 1, **executor})
    assert spark_executor_pod_mib(conf(driver(r))) == pod_mib
    assert executor_memory(r.spec.executor).limit_mib == pod_mib


def test_docs_sizing_shows_the_computed_table() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "sizing.md").read_text()
    assert sizing_table() in text, (
        "docs/sizing.md: paste sizing_table()'s output:\n" + sizing_table()
    )


def test_driver_pod_memory_is_what_the_sizing_says() -> None:
    for cores, memory in SIZES:
        r = replica(executor={"instances": 0}, driver={"cores": cores, "memory": memory})
        resources = container(driver(r))["resources"]
        limit = driver_memory(r.spec.driver).limit
        assert resources["limits"]["memory"] == resources["requests"]["memory"] == limit


@pytest.mark.parametrize(
    "spec",
    [
        {},  # the smallest manifest
        {"expirationOffset": "21d"},
        {"storage": {"size": "1Gi"}},  # ReadWriteOnce: the driver's alone
        {"storage": RWX},
        {"stateUri": URI},
    ],
)
def test_without_a_count_spark_runs_inside_the_driver(spec: dict[str, Any]) -> None:
    r = replica(**spec)
    assert replica_problems(r.spec) == []
    pod = driver(r)
    assert env(pod)[injection.ENV_SPARK_MASTER] == "local[1]"
    assert injection.ENV_EXECUTOR_POD_TEMPLATE not in env(pod)
    assert not [k for k in conf(pod) if k.startswith(("spark.kubernetes.", "spark.executor."))]
    kubernetes_validate.validate(pod, K8S, strict=True)


def test_executors_run_when_asked_for_on_shared_state() -> None:
    for spec in ({"storage": RWX}, {"stateUri": URI}):
        r = replica(**spec, executor={"instances": 3})
        assert replica_problems(r.spec) == []
        assert conf(driver(r))["spark.executor.instances"] == "3"


def test_executors_get_no_service_account_token() -> None:
    executor = template(driver(replica(stateUri=URI, executor={"instances": 2})))
    assert executor["spec"]["automountServiceAccountToken"] is False
    (each,) = executor["spec"]["containers"]
    assert each["terminationMessagePolicy"] == "FallbackToLogsOnError"
    kubernetes_validate.validate(executor, K8S, strict=True)


def test_spark_skips_its_driver_readiness_wait_the_services_publish_not_ready_pods() -> None:
    settings = conf(driver(replica(stateUri=URI, executor={"instances": 2})))
    assert settings["spark.kubernetes.driver.service.publishNotReadyAddresses"] == "true"
    assert build_attempts_service(replica(), CONFIG)["spec"]["publishNotReadyAddresses"] is True


def ports(obj: dict[str, Any]) -> dict[str, int]:
    if obj["kind"] == "Service":
        return {p["name"]: p["port"] for p in obj["spec"]["ports"]}
    return {p["name"]: p["containerPort"] for p in container(obj)["ports"]}


@pytest.mark.parametrize("spec", [{}, {"stateUri": URI, "executor": {"instances": 2}}])
def test_the_spark_ui_is_on_and_reachable_through_the_driver_service(spec: dict[str, Any]) -> None:
    r = replica(**spec)
    pod = driver(r)
    settings = conf(pod)
    assert (settings["spark.ui.enabled"], settings["spark.ui.port"]) == ("true", "4040")
    assert env(pod)["SPARK_LOCAL_IP"] == "0.0.0.0"  # the UI listens beyond the loopback
    service = build_driver_service(r, CONFIG, 1)
    assert ports(pod)["spark-ui"] == ports(service)["spark-ui"] == 4040
    assert next(p for p in service["spec"]["ports"] if p["name"] == "spark-ui")["targetPort"] == (
        "spark-ui"
    )
    kubernetes_validate.validate(service, K8S, strict=True)


def test_spark_ui_false_turns_it_off_and_restarts_the_driver() -> None:
    r = replica(sparkUi=False)
    pod = driver(r)
    assert conf(pod)["spark.ui.enabled"] == "false"
    assert "spark.ui.port" not in conf(pod)
    assert "SPARK_LOCAL_IP" not in env(pod)
    assert "spark-ui" not in ports(pod)
    assert "spark-ui" not in ports(build_driver_service(r, CONFIG, 1))
    assert "spark-ui" not in ports(build_attempts_service(r, CONFIG))
    assert driver_spec_hash(r, CONFIG) != driver_spec_hash(replica(), CONFIG)
    assert driver_spec_hash(replica(sparkUi=True), CONFIG) == driver_spec_hash(replica(), CONFIG)
