"""One-line errors from real PySpark exceptions: the condition and the cause."""

from __future__ import annotations

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader

from dataflow_operator.runtime.errors import one_line

pytestmark = pytest.mark.spark


class _Unimportable(DataSource):
    """Defined in a test module the workers cannot import: creating it there fails, as
    every data source of the project did when the workers ran the system Python."""

    @classmethod
    def name(cls) -> str:
        return "dataflow_test_unimportable"

    def schema(self) -> str:
        return "n INT"

    def reader(self, schema: object) -> DataSourceReader:
        raise AssertionError("never created: the workers cannot unpickle this class")


def test_a_python_worker_traceback_gives_its_cause(spark: SparkSession) -> None:
    spark.dataSource.register(_Unimportable)
    with pytest.raises(PySparkException) as caught:
        spark.read.format("dataflow_test_unimportable").load().collect()
    assert "Traceback (most recent call last):" in str(caught.value)
    line = one_line(caught.value)
    module = _Unimportable.__module__.split(".")[0]
    assert line == f"PYTHON_DATA_SOURCE_ERROR: ModuleNotFoundError: No module named '{module}'"


def test_an_analysis_error_gives_its_condition_and_message(spark: SparkSession) -> None:
    with pytest.raises(PySparkException) as caught:
        spark.sql("SELECT no_such_column FROM range(1)").collect()
    line = one_line(caught.value)
    assert line.startswith("UNRESOLVED_COLUMN.WITH_SUGGESTION: ")
    assert "no_such_column" in line and "\n" not in line
