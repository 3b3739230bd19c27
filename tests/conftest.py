"""Shared fixtures: one Spark session at a time for the whole test session.

Its master is ``local[2]``: the driver runs the tasks, and Python workers are processes of
their own as everywhere. Tests marked ``local_cluster`` prove the executor boundary: they
get a ``local-cluster[2,1,1024]`` session instead (two executors, each a separate JVM with
its own Python workers and working directory, as on Kubernetes), which shows that what
executors do never depends on the driver's memory or working directory, only on the state
location they are given. They are collected last, so a run switches masters once.
``DATAFLOW_TEST_SPARK_MASTER`` overrides the default master (``local-cluster[2,1,1024]``
runs every Spark test across the executor boundary).

Every test that uses the ``spark`` fixture is marked ``spark_session``: ``tools/test_lanes.py``
(``make test``) runs those in one process of their own, beside the other tests, so only one
in-process Spark session ever runs (see docs/architecture.md, "Tests").
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
import structlog
from hypothesis import settings

from tests.jvm import TEST_SPARK_CONF

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytest_plugins = [
    "tests.kafka_broker",  # the kafka_broker fixtures
    "tests.replica_fixtures",  # fake_replica, operator_log
]

settings.register_profile("dataflow", deadline=None)
settings.load_profile("dataflow")
"""Hypothesis checks what examples give, not how fast: on a busy 2-core machine a
deadline fails a correct example."""


def pytest_configure(config: pytest.Config) -> None:
    """structlog's defaults (what in-process code logs with here: tests read its lines on
    stdout), but a logged exception rendered as the console scripts render it: the
    default renders each frame's local variables, slowly, inside the in-process control
    servers' event loops."""
    *processors, _renderer = structlog.get_config()["processors"]
    plain = structlog.dev.ConsoleRenderer(
        colors=False, exception_formatter=structlog.dev.plain_traceback
    )
    structlog.configure(processors=[*processors, plain])


TEST_MASTER = os.environ.get("DATAFLOW_TEST_SPARK_MASTER", "local[2]")
CLUSTER_MASTER = "local-cluster[2,1,1024]"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests on the shared session; put the executor-boundary tests last and,
    before them, the slow tests first: pytest-xdist hands out the first tests one to each
    worker in turn, so the long ones start side by side rather than queue behind each
    other on one worker while the others finish."""
    for item in items:
        # A test parametrized with an argument named ``spark`` takes that value, not the session.
        parameters = getattr(getattr(item, "callspec", None), "params", {})
        if "spark" in getattr(item, "fixturenames", ()) and "spark" not in parameters:
            item.add_marker(pytest.mark.spark_session)
    items.sort(
        key=lambda item: (
            item.get_closest_marker("local_cluster") is not None,
            item.get_closest_marker("slow") is None,
        )
    )


class _SharedSession:
    """The one Spark session of this test process, restarted when a test needs another master."""

    def __init__(self) -> None:
        self.master: str | None = None
        self.session: SparkSession | None = None

    def get(self, master: str) -> SparkSession:
        from dataflow_operator.runtime.session import spark_session

        if self.session is not None and self.master != master:
            self.stop()
        if self.session is None:
            self.session = spark_session(
                master=master, app_name="dataflow-operator-tests", conf=TEST_SPARK_CONF
            )
            self.master = master
        return self.session

    def stop(self) -> None:
        if self.session is not None:
            self.session.stop()
        self.session = None
        self.master = None


@pytest.fixture(scope="session")
def _shared_spark() -> Iterator[_SharedSession]:
    shared = _SharedSession()
    yield shared
    shared.stop()


@pytest.fixture
def spark(request: pytest.FixtureRequest, _shared_spark: _SharedSession) -> SparkSession:
    """The test process's Spark session: ``local-cluster`` for ``local_cluster`` tests."""
    boundary = request.node.get_closest_marker("local_cluster") is not None
    return _shared_spark.get(CLUSTER_MASTER if boundary else TEST_MASTER)
