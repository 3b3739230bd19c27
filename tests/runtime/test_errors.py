"""What failed, from real PySpark failures: the condition, the raised error, retry or not."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader
from pyspark.sql.functions import udf

from dataflow_operator.runtime.errors import is_data_error, one_line, spark_chain
from dataflow_operator.runtime.values import BadValue

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


def _failure(run: Callable[[], object]) -> PySparkException:
    with pytest.raises(PySparkException) as caught:
        run()
    return caught.value


def test_a_python_worker_traceback_gives_its_cause(spark: SparkSession) -> None:
    spark.dataSource.register(_Unimportable)
    error = _failure(lambda: spark.read.format("dataflow_test_unimportable").load().collect())
    module = _Unimportable.__module__.split(".")[0]
    assert one_line(error) == (
        f"PYTHON_DATA_SOURCE_ERROR: ModuleNotFoundError: No module named '{module}'"
    )
    assert not is_data_error(error)  # a deployment fault: a restarted worker may have it


def test_a_data_error_raised_in_a_worker_is_its_message_and_final(spark: SparkSession) -> None:
    @udf("int")
    def reject(n: int) -> int:
        raise BadValue(f"row {n}: diff 'x' is not an integer")

    error = _failure(lambda: spark.range(1).select(reject("id")).collect())
    assert error.getCondition() == "PYTHON_EXCEPTION"
    assert one_line(error) == "row 0: diff 'x' is not an integer"
    assert is_data_error(error)


def test_another_worker_error_follows_its_condition_and_is_retried(spark: SparkSession) -> None:
    @udf("int")
    def crash(n: int) -> int:
        raise RuntimeError(f"row {n}: lost\nsecond line")

    error = _failure(lambda: spark.range(1).select(crash("id")).collect())
    assert one_line(error) == "PYTHON_EXCEPTION: RuntimeError: row 0: lost"
    assert not is_data_error(error)


def test_a_data_error_in_foreach_batch_ends_the_stream_with_its_message(
    spark: SparkSession, tmp_path: Path
) -> None:
    (tmp_path / "in.json").write_text('{"n": 1}\n')

    def write(batch: DataFrame, batch_id: int) -> None:
        raise BadValue(f"batch {batch_id}: refused")

    stream = spark.readStream.schema("n INT").json(str(tmp_path))
    query = stream.writeStream.foreachBatch(write).start()
    try:
        error = _failure(query.processAllAvailable)
    finally:
        query.stop()
    assert [link.getCondition() for link in spark_chain(error)][:2] == [
        "STREAM_FAILED",
        None,  # the driver's Python callback: not a Spark error
    ]
    assert one_line(error) == "batch 0: refused"
    assert is_data_error(error)


@pytest.mark.parametrize(
    ("sql", "condition"),
    [
        ("SELECT no_such_column FROM range(1)", "UNRESOLVED_COLUMN.WITH_SUGGESTION"),
        ("SELEC 1", "PARSE_SYNTAX_ERROR"),
        ("SELECT CAST('x' AS INT)", "CAST_INVALID_INPUT"),
    ],
)
def test_query_and_data_errors_give_their_condition_and_are_final(
    spark: SparkSession, sql: str, condition: str
) -> None:
    error = _failure(lambda: spark.sql(sql).collect())
    line = one_line(error)
    assert line.startswith(f"{condition}: ") and "\n" not in line
    assert f"[{condition}]" not in line
    assert is_data_error(error)
