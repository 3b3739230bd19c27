"""Pure builders of the Kubernetes objects behind a Replica: its driver Pod and Service,
its state claim, its control-token Secret and its executor pod template.

One module per kind of object: :mod:`.pods` (the driver Pod, the executor pod template,
the control-token Secret), :mod:`.spark` (the driver's Spark settings), :mod:`.state`
(the state location, its volume and claim), :mod:`.services` (the two Services and the
address of an attempt's control API), over :mod:`.common` (the attempt, names, owner).

The driver runs ``dataflow-operator replica`` in the Replica's image. With
``executor.instances: 0`` Spark runs in local mode inside it (``local[<driver cores>]``);
otherwise Spark, in client mode inside that pod, creates the executors itself
(``spark.kubernetes.*``): in the same namespace, with the replica's image and service
account, from the executor pod template built here. Spark adds the driver pod as the
executors' controller owner (``spark.kubernetes.driver.pod.name``), so the template
carries no owner reference of its own: executors go with their driver, the driver with
the Replica. The operator injects the attempt's start time and expiration offset, as
environment variables and as Spark conf (names in :mod:`dataflow_operator.api.injection`).

Injected environment of the driver container:

==================================  ==================================================
``DATAFLOW_REPLICA_START_TIME_MS``  attempt start, epoch milliseconds
``DATAFLOW_REPLICA_START_TIME``     the same, RFC 3339
``DATAFLOW_EXPIRATION_OFFSET``      offset in force (``21d``; ``0`` disables)
``DATAFLOW_REPLICA``/``_NAMESPACE``  the Replica
``DATAFLOW_CLUSTER``/``_ATTEMPT``   its cluster and the attempt number
``DATAFLOW_CONTROL_ADDRESS``        ``0.0.0.0:PORT`` the control API listens on
``DATAFLOW_CONTROL_TOKEN_FILE``     ``/var/run/dataflow/control/token`` (the Secret)
``DATAFLOW_SPARK_MASTER``           ``k8s://https://kubernetes.default.svc``, or
                                    ``local[N]`` with ``executor.instances: 0``
``DATAFLOW_SPARK_CONF``             every Spark setting below, as a JSON object
``DATAFLOW_STATE_URI``              the attempt's state (see below)
``DATAFLOW_STATE_KEEP``             a successor's predecessor's state (see below)
``DATAFLOW_EXECUTOR_POD_TEMPLATE``  the executor pod template, JSON (with executors)
``SPARK_LOCAL_IP``                  ``0.0.0.0`` with the Spark UI (``spec.sparkUi``), so
                                    that it listens beyond the loopback
==================================  ==================================================

The state location holds the runtime's checkpoints and changelogs, reached by the driver
and every executor. With ``spec.stateUri`` it is that URI (credentials from
``spec.stateCredentials`` as ``envFrom`` on every pod). Otherwise it is
``file:///opt/dataflow/state``, the mounted ``state`` volume: with ``spec.storage`` the
Replica's PersistentVolumeClaim (``<replica>-state``, built by :func:`build_state_claim`,
created before any driver pod, shared by every attempt and mounted on every executor), so
a restarted driver resumes from its checkpoint; without it, an emptyDir that dies with
the pod (driver only: :mod:`dataflow_operator.api.replica_rules` refuses executors then).

A make-before-break successor runs beside the driver it succeeds, so it gets its own
state, ``attempts/N`` under the location, and ``DATAFLOW_STATE_KEEP`` names the
predecessor's (it removes every other attempt's state when it starts). Every other
attempt keeps the state directory of the one it replaces and resumes from its checkpoint.

Two Services: the driver Service (``<replica>-driver``, :func:`build_driver_service`)
selects the serving attempt's pod, and is what users and the operator address (the
control API, and the Spark UI on port 4040 unless ``spec.sparkUi: false``); the
headless ``<replica>-attempts`` (:func:`build_attempts_service`) gives every driver pod
its own DNS name, ``driver-N.<replica>-attempts``, which its executors reach it by.

Executors run without a service-account token (``automountServiceAccountToken: false``
in their template): they run user SQL and never call the API server; the driver creates,
watches and deletes them (and their ConfigMap) under its own account.

The control API requires the token of the Replica's Secret ``<replica>-control-token``
(built by :func:`build_control_token_secret`), mounted read-only into the driver.
"""

from __future__ import annotations

from dataflow_operator.controller.manifests.common import (
    DRIVER_BLOCK_MANAGER_PORT,
    DRIVER_PORT,
    Attempt,
    attempt_host,
    effective_offset,
    memory_to_spark,
    quantity_bytes,
)
from dataflow_operator.controller.manifests.pods import (
    CONTROL_TOKEN_DIR,
    CONTROL_TOKEN_FILE,
    CONTROL_TOKEN_KEY,
    build_control_token_secret,
    build_driver_pod,
    build_executor_pod_template,
    driver_spec_hash,
)
from dataflow_operator.controller.manifests.services import (
    build_attempts_service,
    build_driver_service,
    control_address,
    driver_service_selector,
)
from dataflow_operator.controller.manifests.spark import SPARK_MASTER, spark_conf, spark_master
from dataflow_operator.controller.manifests.state import (
    LOCAL_STATE_URI,
    STATE_DIR,
    STATE_VOLUME,
    build_state_claim,
    state_uri,
)

__all__ = [
    "CONTROL_TOKEN_DIR",
    "CONTROL_TOKEN_FILE",
    "CONTROL_TOKEN_KEY",
    "DRIVER_BLOCK_MANAGER_PORT",
    "DRIVER_PORT",
    "LOCAL_STATE_URI",
    "SPARK_MASTER",
    "STATE_DIR",
    "STATE_VOLUME",
    "Attempt",
    "attempt_host",
    "build_attempts_service",
    "build_control_token_secret",
    "build_driver_pod",
    "build_driver_service",
    "build_executor_pod_template",
    "build_state_claim",
    "control_address",
    "driver_service_selector",
    "driver_spec_hash",
    "effective_offset",
    "memory_to_spark",
    "quantity_bytes",
    "spark_conf",
    "spark_master",
    "state_uri",
]
