"""A new dataflow's state partitions follow the replica's cores or the user's choice."""

from __future__ import annotations

import os

import pytest

from dataflow_operator.runtime.engine.partitions import master_cores, state_partitions
from dataflow_operator.runtime.strategies.buckets import BUCKETS

K8S = "k8s://https://kubernetes.default.svc"


@pytest.mark.parametrize(
    ("master", "conf", "cores"),
    [
        ("local", {}, 1),
        ("local[3]", {}, 3),
        ("local[4,2]", {}, 4),  # threads, then task retries
        ("local[*]", {}, os.cpu_count() or 1),
        ("local-cluster[2,1,1024]", {}, 2),
        ("local-cluster[3, 2, 512]", {}, 6),
        (K8S, {"spark.executor.instances": "4", "spark.executor.cores": "2"}, 8),
        (K8S, {"spark.executor.instances": "5"}, 5),  # one core each by default
        (K8S, {}, 2),  # Spark's default: two executors
        (K8S, {"spark.executor.instances": "many"}, 2),
    ],
)
def test_the_cores_a_master_runs_tasks_on(master: str, conf: dict[str, str], cores: int) -> None:
    assert master_cores(master, conf) == cores


def test_one_partition_per_core_so_that_added_executors_share_the_work() -> None:
    two = {"spark.executor.instances": "2", "spark.executor.cores": "2"}
    six = {"spark.executor.instances": "6", "spark.executor.cores": "2"}
    assert state_partitions(K8S, two) == 4
    assert state_partitions(K8S, six) == 12
    assert state_partitions("local[2]", {}) == 2


def test_the_users_shuffle_partitions_win() -> None:
    conf = {"spark.executor.instances": "8", "spark.sql.shuffle.partitions": "3"}
    assert state_partitions(K8S, conf) == 3
    assert state_partitions("local[1]", {"spark.sql.shuffle.partitions": "5"}) == 5
    # not a positive number: the cores decide
    assert state_partitions("local[2]", {"spark.sql.shuffle.partitions": "0"}) == 2


def test_never_more_partitions_than_the_operators_state_keys() -> None:
    many = {"spark.executor.instances": "50", "spark.executor.cores": "4"}
    assert state_partitions(K8S, many) == BUCKETS
    assert state_partitions("local[2]", {"spark.sql.shuffle.partitions": "200"}) == BUCKETS
