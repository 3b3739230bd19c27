"""What the operator injects into a replica's driver, and how the driver reports back.

The one place these names are defined: the operator's manifest builder writes them, the
runtime reads them (environment first, then Spark conf), and the docs list them.
"""

from __future__ import annotations

__all__ = [
    "CONF_EXPIRATION_OFFSET",
    "CONF_START_TIME_MS",
    "ENV_ATTEMPT",
    "ENV_CLUSTER",
    "ENV_CONTROL_ADDRESS",
    "ENV_CONTROL_TOKEN_FILE",
    "ENV_EXECUTOR_POD_TEMPLATE",
    "ENV_EXPIRATION_OFFSET",
    "ENV_NAMESPACE",
    "ENV_REPLICA",
    "ENV_SPARK_CONF",
    "ENV_SPARK_MASTER",
    "ENV_START_TIME",
    "ENV_START_TIME_MS",
    "ENV_STATE_DIR",
    "ENV_STATE_KEEP",
    "ENV_STATE_URI",
    "EXIT_EXPIRED",
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_USAGE",
    "STATE_ATTEMPTS_DIR",
    "STATE_DIR_PATTERN",
]

ENV_START_TIME_MS = "DATAFLOW_REPLICA_START_TIME_MS"
"""The replica's start time, epoch milliseconds."""
ENV_START_TIME = "DATAFLOW_REPLICA_START_TIME"
"""The same start time, RFC 3339 (for humans reading ``kubectl describe pod``)."""
ENV_EXPIRATION_OFFSET = "DATAFLOW_EXPIRATION_OFFSET"
"""The expiration offset as a duration (``21d``); ``0`` or absent disables expiration."""
ENV_REPLICA = "DATAFLOW_REPLICA"
"""The Replica's name."""
ENV_NAMESPACE = "DATAFLOW_NAMESPACE"
"""The Replica's namespace."""
ENV_CLUSTER = "DATAFLOW_CLUSTER"
"""The Replica's cluster."""
ENV_ATTEMPT = "DATAFLOW_ATTEMPT"
"""The driver attempt number."""
ENV_CONTROL_ADDRESS = "DATAFLOW_CONTROL_ADDRESS"
"""``host:port`` the control API listens on."""
ENV_STATE_DIR = "DATAFLOW_STATE_DIR"
"""Directory for checkpoints and runtime-owned data (a local path; older name of
:data:`ENV_STATE_URI`, read when that is absent)."""
ENV_STATE_URI = "DATAFLOW_STATE_URI"
"""The replica's one state location, reached by the driver and every executor: a path
or ``file://`` URI on a volume mounted in every pod (``spec.storage``, or an emptyDir),
or an object-store / HDFS URI (``spec.stateUri``: ``s3a://bucket/prefix``, ``gs://…``,
``abfss://…``, ``hdfs://…``)."""
STATE_ATTEMPTS_DIR = "attempts"
"""Below the state location: the make-before-break successors' own state, one directory
per attempt number."""
STATE_DIR_PATTERN = rf"^({STATE_ATTEMPTS_DIR}/[0-9]{{1,9}})?$"
"""An attempt's state directory relative to the location: ``''`` (its root) or
``attempts/N``; nothing else may name one (it is joined to the location)."""
ENV_STATE_KEEP = "DATAFLOW_STATE_KEEP"
"""Set on a make-before-break successor, whose state is ``<location>/attempts/N``: the
state directory of the driver it succeeds (relative to the location, ``''`` for its
root). At start the successor removes every other attempt's state, so at most the two
attempts of one handover keep state."""
ENV_EXECUTOR_POD_TEMPLATE = "DATAFLOW_EXECUTOR_POD_TEMPLATE"
"""The executor pod template (a JSON Pod) the operator built from the Replica: volumes,
mounts, env (``valueFrom`` included), security context, labels, owner references. The
driver writes it to a file at start-up and points
``spark.kubernetes.executor.podTemplateFile`` at it."""
ENV_CONTROL_TOKEN_FILE = "DATAFLOW_CONTROL_TOKEN_FILE"
"""A file holding the bearer token the control API requires (the Replica's Secret,
mounted); absent: the control API is open (a local replica)."""
ENV_SPARK_MASTER = "DATAFLOW_SPARK_MASTER"
"""The Spark master the driver connects to: ``k8s://https://kubernetes.default.svc`` in a
cluster; absent → ``local[*]``."""
ENV_SPARK_CONF = "DATAFLOW_SPARK_CONF"
"""Every Spark setting the operator chose (a JSON object of strings): ``spark.kubernetes.*``
for executors, resources, driver host and ports, the Replica's ``sparkConf``, and the
``spark.dataflow.*`` twins below. The runtime passes them to its Spark session."""

CONF_START_TIME_MS = "spark.dataflow.replica.startTimeMs"
"""Spark conf twin of :data:`ENV_START_TIME_MS`."""
CONF_EXPIRATION_OFFSET = "spark.dataflow.replica.expirationOffset"
"""Spark conf twin of :data:`ENV_EXPIRATION_OFFSET`."""

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_EXPIRED = 75
"""The runtime stopped at its expiration (sysexits' EX_TEMPFAIL): restart, not a failure."""
