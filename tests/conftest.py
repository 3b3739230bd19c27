"""Shared fixtures: one local Spark session for the whole test session."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """A local[2] Spark session, started once (seconds) and shared by every test."""
    from dataflow_operator.runtime.session import spark_session

    session = spark_session(app_name="dataflow-operator-tests")
    yield session
    session.stop()
