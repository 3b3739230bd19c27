"""How many partitions a new dataflow's state is split into.

A stateful stage runs one task per state partition, so the partitions bound how many
cores a dataflow's state work uses at once: one per core the replica has (its
executors' cores on Kubernetes, the local master's threads otherwise), so that executors
added to a Replica share the work. The user's own ``spark.sql.shuffle.partitions`` (a
Replica's ``sparkConf``, ``--conf``) wins. Either way at most :data:`BUCKETS`: the
operators group their state into that many keys, and a partition beyond them would hold
nothing. A dataflow keeps the number it started with (Spark fixes it in the checkpoint).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from dataflow_operator.runtime.engine.query_conf import SHUFFLE_PARTITIONS
from dataflow_operator.runtime.strategies.buckets import BUCKETS

__all__ = ["master_cores", "state_partitions"]

_LOCAL = re.compile(r"local(?:\[(?P<threads>\d+|\*)(?:,\s*\d+)?\])?")
_LOCAL_CLUSTER = re.compile(r"local-cluster\[\s*(?P<workers>\d+)\s*,\s*(?P<cores>\d+)\s*,.*\]")
_EXECUTOR_INSTANCES = "spark.executor.instances"
_EXECUTOR_CORES = "spark.executor.cores"
_SPARK_DEFAULT_INSTANCES = 2  # Spark's own default for spark.executor.instances


def master_cores(master: str, conf: Mapping[str, str]) -> int:
    """The cores Spark runs tasks on under ``master``: a local master's threads, a local
    cluster's workers × cores, else the executors' (``spark.executor.instances`` ×
    ``spark.executor.cores``)."""
    if (local := _LOCAL.fullmatch(master)) is not None:
        threads = local["threads"]
        if threads is None:
            return 1
        if threads == "*":
            return os.cpu_count() or 1
        return max(1, int(threads))
    if (cluster := _LOCAL_CLUSTER.fullmatch(master)) is not None:
        return max(1, int(cluster["workers"]) * int(cluster["cores"]))
    instances = _positive(conf.get(_EXECUTOR_INSTANCES), _SPARK_DEFAULT_INSTANCES)
    return instances * _positive(conf.get(_EXECUTOR_CORES), 1)


def state_partitions(master: str, conf: Mapping[str, str]) -> int:
    """Partitions of a new dataflow's state: the user's ``spark.sql.shuffle.partitions``
    or one per core (:func:`master_cores`), from 1 to :data:`BUCKETS`."""
    chosen = _positive(conf.get(SHUFFLE_PARTITIONS), 0) or master_cores(master, conf)
    return min(chosen, BUCKETS)


def _positive(text: str | None, default: int) -> int:
    try:
        value = int(str(text).strip())
    except ValueError:
        return default
    return value if value > 0 else default
