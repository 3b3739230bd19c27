"""A ``files`` source: a directory of CSV, JSON or Parquet files, rows at their ingestion time."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from tests.runtime.runs import DAY, T

from dataflow_operator.api.dataflow import DataflowSpec
from dataflow_operator.runtime.engine.config import EngineConfig
from dataflow_operator.runtime.engine.engine import Engine, dataflows_from
from dataflow_operator.runtime.engine.running import BatchOutput

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("file_format", ["csv", "parquet"])
def test_files_are_ingested_at_the_batch_that_sees_them(
    spark: SparkSession, tmp_path: Path, file_format: str
) -> None:
    directory = tmp_path / "files"
    directory.mkdir()

    def add(name: str, rows: list[tuple[int, str]]) -> None:
        path = directory / f"{name}.{file_format}"
        if file_format == "csv":
            path.write_text("id,name\n" + "".join(f"{i},{n}\n" for i, n in rows))
        else:
            ids, names = zip(*rows, strict=True)
            pq.write_table(pa.table({"id": list(ids), "name": list(names)}), path)

    add("a", [(1, "ada"), (2, "bob")])
    spec = DataflowSpec.model_validate(
        {
            "cluster": "c",
            "kind": "Subscribe",
            "sources": [
                {
                    "name": "people",
                    "files": {
                        "path": str(directory),
                        "format": file_format,
                        "schema": "id BIGINT, name STRING",
                    },
                }
            ],
            "sql": "SELECT id, upper(name) AS name FROM people WHERE id > 1",
        }
    )
    outputs: list[BatchOutput] = []
    engine = Engine(spark, EngineConfig(tmp_path / "state", T), on_output=outputs.append)
    try:
        assert not engine.apply(dataflows_from([("people", spec)])).failed
        engine.step(T)
        add("b", [(3, "cy")])
        engine.step(T + DAY)
        updates = [u for o in outputs for u in o.updates]
        assert updates == [(T, 1, (2, "BOB")), (T + DAY, 1, (3, "CY"))]
    finally:
        engine.close()
