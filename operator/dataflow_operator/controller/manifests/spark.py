"""The driver's Spark settings: local mode without executors, else Spark on Kubernetes."""

from __future__ import annotations

import math

from dataflow_operator.api import injection
from dataflow_operator.api.replica import Replica
from dataflow_operator.controller.config import OperatorConfig
from dataflow_operator.controller.manifests.common import (
    DRIVER_BLOCK_MANAGER_PORT,
    DRIVER_PORT,
    UI_PORT,
    Attempt,
    attempt_host,
    image_of,
    memory_to_spark,
    namespace_of,
    service_account_of,
)
from dataflow_operator.controller.manifests.sizing import executor_memory
from dataflow_operator.controller.naming import (
    EXECUTOR_CONTAINER,
    LABEL_ROLE,
    ROLE_EXECUTOR,
    standard_labels,
)
from dataflow_operator.core.durations import Duration

__all__ = ["SPARK_MASTER", "spark_conf", "spark_master"]

SPARK_MASTER = "k8s://https://kubernetes.default.svc"
_PROTECTED_PREFIXES = (
    "spark.dataflow.",
    "spark.kubernetes.driver.pod.name",
    "spark.kubernetes.executor.podTemplateContainerName",
    "spark.kubernetes.executor.useDriverPodIP",
)


def spark_master(replica: Replica) -> str:
    """``local[<driver cores>]`` without executors, else Kubernetes."""
    if replica.spec.executor.instances == 0:
        return f"local[{max(1, math.ceil(replica.spec.driver.cores))}]"
    return SPARK_MASTER


def spark_conf(
    replica: Replica, config: OperatorConfig, attempt: Attempt, offset: Duration
) -> dict[str, str]:
    """The Spark settings of the driver: resources, injection, and executors on Kubernetes.

    Without executors (``executor.instances: 0``) Spark runs in local mode and gets no
    ``spark.kubernetes.*``, ``spark.executor.*`` or driver-address settings. The
    Replica's own ``sparkConf`` overrides the operator's choices except the injected
    ``spark.dataflow.*`` twins, the driver pod name (Spark needs it to own its executors),
    the pod template's container name and ``useDriverPodIP`` (executors reach the driver
    by its attempt's DNS name).
    """
    spec = replica.spec
    conf: dict[str, str] = {
        "spark.master": spark_master(replica),
        "spark.submit.deployMode": "client",
        "spark.app.name": f"{namespace_of(replica)}.{replica.metadata.name}",
        "spark.driver.cores": str(spec.driver.cores),
        "spark.driver.memory": memory_to_spark(spec.driver.memory),
        "spark.ui.enabled": "true" if spec.spark_ui else "false",
    }
    if spec.spark_ui:
        conf["spark.ui.port"] = str(UI_PORT)
    if spec.driver.memory_overhead:
        conf["spark.driver.memoryOverhead"] = memory_to_spark(spec.driver.memory_overhead)
    if spec.executor.instances > 0:
        conf.update(_executor_conf(replica, config, attempt))
    user = {k: v for k, v in spec.spark_conf.items() if not k.startswith(_PROTECTED_PREFIXES)}
    conf.update(user)
    if spec.executor.instances > 0:
        conf["spark.kubernetes.driver.pod.name"] = attempt.pod_name
        conf["spark.kubernetes.executor.podTemplateContainerName"] = EXECUTOR_CONTAINER
        # Executors dial the driver at spark.driver.host, the attempt's own DNS name (the
        # headless attempts Service publishes it before the pod is ready). Spark >= 4.1
        # (BasicExecutorFeatureStep) otherwise hands them spark.driver.bindAddress, its
        # default useDriverPodIP=true assuming Spark's own entrypoint bound it to the pod
        # IP; ours is 0.0.0.0, which an executor dials as itself. Spark 4.0 ignores the
        # key and uses spark.driver.host already, so every 4.x gets the same address.
        conf["spark.kubernetes.executor.useDriverPodIP"] = "false"
    conf[injection.CONF_START_TIME_MS] = str(attempt.start_time_ms)
    conf[injection.CONF_EXPIRATION_OFFSET] = str(offset)
    return dict(sorted(conf.items()))


def _executor_conf(replica: Replica, config: OperatorConfig, attempt: Attempt) -> dict[str, str]:
    """Spark on Kubernetes: where and how Spark creates the executors."""
    spec = replica.spec
    labels = standard_labels(replica.metadata.name, spec.cluster)
    conf: dict[str, str] = {
        "spark.kubernetes.namespace": namespace_of(replica),
        "spark.kubernetes.container.image": image_of(replica, config),
        "spark.kubernetes.executor.deleteOnTermination": "true",
        # Spark waits (1 s) for the driver pod to be ready before creating executors,
        # lest they fail to resolve its name, and logs an ERROR when it is not: ours is
        # ready once the operator has given it its dataflows, and its name resolves
        # before (both Services publish not-ready addresses). This skips the wait
        # (Spark >= 4.3; earlier versions ignore it).
        "spark.kubernetes.driver.service.publishNotReadyAddresses": "true",
        "spark.driver.host": attempt_host(replica, attempt.number),
        "spark.driver.bindAddress": "0.0.0.0",
        "spark.driver.port": str(DRIVER_PORT),
        "spark.driver.blockManager.port": str(DRIVER_BLOCK_MANAGER_PORT),
        "spark.executor.instances": str(spec.executor.instances),
        "spark.executor.cores": str(spec.executor.cores),
        "spark.executor.memory": memory_to_spark(spec.executor.memory),
    }
    if spec.image_pull_policy:
        conf["spark.kubernetes.container.image.pullPolicy"] = spec.image_pull_policy
    account = service_account_of(replica, config)
    if account:
        conf["spark.kubernetes.authenticate.driver.serviceAccountName"] = account
        conf["spark.kubernetes.authenticate.executor.serviceAccountName"] = account
    # always set: Spark would give a PySpark application's executors in client mode the
    # overhead of a JVM alone, and their Python workers would take them past the limit
    overhead_mib = executor_memory(spec.executor).overhead // 2**20
    conf["spark.executor.memoryOverhead"] = f"{overhead_mib}m"
    for key, value in {**labels, LABEL_ROLE: ROLE_EXECUTOR}.items():
        conf[f"spark.kubernetes.executor.label.{key}"] = value
    # the Replica's env (valueFrom included) reaches executors through the pod template
    return conf
