"""Shared fixtures: one Spark session for the whole test session, on one worker.

Its master is ``local-cluster[2,1,1024]``: two executors, each a separate JVM with its own
Python workers and working directory, as on Kubernetes. Every Spark test therefore proves
that what executors do never depends on the driver's memory or working directory (only
on the state location they are given). ``DATAFLOW_TEST_SPARK_MASTER=local[2]`` runs the
suite in one process instead (quicker to start, for iterating).

The suite runs on two pytest-xdist workers (``-n 2 --dist loadgroup`` in pyproject): every
test that uses the session is put in one group, so one worker runs them all, one at a
time, and only that worker starts Spark; the other worker runs everything else beside
it (much of which waits on clocks and subprocesses rather than on the CPU).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from tests.jvm import TEST_SPARK_CONF

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytest_plugins = ["tests.kafka_broker"]  # the kafka_broker fixtures

TEST_MASTER = os.environ.get("DATAFLOW_TEST_SPARK_MASTER", "local-cluster[2,1,1024]")


SPARK_SESSION_GROUP = "spark-session"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put every test that uses the shared Spark session on one xdist worker."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group(SPARK_SESSION_GROUP))


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The test session's Spark session, started once and shared by every test."""
    from dataflow_operator.runtime.session import spark_session

    session = spark_session(
        master=TEST_MASTER,
        app_name="dataflow-operator-tests",
        conf=TEST_SPARK_CONF,
    )
    yield session
    session.stop()
