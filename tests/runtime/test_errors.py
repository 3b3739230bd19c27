"""What failed, from real PySpark failures: the condition, the raised error, retry or not."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader
from pyspark.sql.functions import udf

from dataflow_operator.runtime.errors import (
    is_data_error,
    one_line,
    quiet_repeated_error_logs,
    spark_chain,
    without_reserved_suggestions,
)
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


def test_an_unknown_column_suggests_no_column_of_the_runtime(spark: SparkSession) -> None:
    frame = spark.createDataFrame([("a", 1, 1)], "content STRING, __time BIGINT, __diff BIGINT")
    frame.createOrReplaceTempView("changes_of_upstream")
    error = _failure(lambda: spark.sql("SELECT contnt FROM changes_of_upstream").collect())
    line = one_line(error)
    assert line.startswith("UNRESOLVED_COLUMN.WITH_SUGGESTION: ") and "`contnt`" in line
    assert "Did you mean one of the following? [`content`]." in line
    assert "__time" not in line and "__diff" not in line


def test_a_java_error_py4j_did_not_convert_is_the_exception_not_the_call(
    spark: SparkSession,
) -> None:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    with pytest.raises(Py4JJavaError) as caught:
        jvm.java.lang.Class.forName("no.such.Thing")
    assert str(caught.value).startswith("An error occurred while calling")
    assert one_line(caught.value) == "java.lang.ClassNotFoundException: no.such.Thing"
    assert not is_data_error(caught.value)


def test_reserved_suggestions_are_dropped_and_an_empty_list_with_them() -> None:
    only_mine = "name `x` cannot be resolved. Did you mean one of the following? [`t`.`__time`, `__diff`]. SQLSTATE: 42703"
    assert without_reserved_suggestions(only_mine) == "name `x` cannot be resolved. SQLSTATE: 42703"
    mixed = "Did you mean one of the following? [`a`, `t`.`__diff`, `b`]."
    assert without_reserved_suggestions(mixed) == "Did you mean one of the following? [`a`, `b`]."


def test_a_failed_query_leaves_no_json_log_line_on_stderr(
    spark: SparkSession, capfd: pytest.CaptureFixture[str]
) -> None:
    quiet_repeated_error_logs()  # what run and replica do at start
    error = _failure(lambda: spark.sql("SELECT contnt FROM range(1)").collect())
    assert one_line(error).startswith("UNRESOLVED_COLUMN")
    assert "QueryContextLogger" not in capfd.readouterr().err


def test_py4j_leaves_out_only_the_data_errors_spark_relayed_to_a_callback(
    spark: SparkSession, caplog: pytest.LogCaptureFixture
) -> None:
    @udf("int")
    def reject(n: int) -> int:
        raise BadValue(f"row {n}: refused")

    @udf("int")
    def crash(n: int) -> int:
        raise RuntimeError(f"row {n}: lost")

    # what a sink's collect raises in its foreachBatch callback when a worker fails
    relayed_data = _failure(lambda: spark.range(1).select(reject("id")).collect())
    relayed_crash = _failure(lambda: spark.range(1).select(crash("id")).collect())
    own_bug = ValueError("raised by the callback's own code")
    quiet_repeated_error_logs()  # what run and replica do at start
    py4j = logging.getLogger("py4j.clientserver")
    for error in (relayed_data, relayed_crash, own_bug):
        try:
            raise error
        except Exception:
            py4j.exception("There was an exception while executing the Python Proxy")
    reported = [r.exc_info[1] for r in caplog.records if r.exc_info]
    assert reported == [relayed_crash, own_bug]
