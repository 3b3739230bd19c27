"""The replica's Spark session starts locally and runs a query."""

from pyspark.sql import SparkSession


def test_local_session_runs_sql(spark: SparkSession) -> None:
    assert spark.sql("SELECT 1 + 1 AS two").collect()[0].two == 2
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
