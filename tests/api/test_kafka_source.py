"""A kafka source's settings, as ``dataflow-operator check`` reports them offline."""

from __future__ import annotations

from pathlib import Path

import pytest

from dataflow_operator.api.dataflow import KafkaSource
from dataflow_operator.cli import main

KAFKA_FLOW = """\
apiVersion: dataflow.dev/v1alpha1
kind: Dataflow
metadata: {{name: feed}}
spec:
  cluster: default
  kind: Subscribe
  sources:
    - name: clicks
      kafka: {{bootstrapServers: "k:9092", topic: clicks, schema: "url STRING"{extra}}}
  sql: {sql}
"""


def _check(tmp_path: Path, capsys: pytest.CaptureFixture[str], **fields: str) -> tuple[int, str]:
    text = KAFKA_FLOW.format(
        extra=fields.get("extra", ""), sql=fields.get("sql", "SELECT url FROM clicks")
    )
    path = tmp_path / "feed.yaml"
    path.write_text(text)
    code = main(["check", str(path)])
    return code, capsys.readouterr().out


def test_a_kafka_source_passes_with_a_group_and_a_batch_size(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _check(tmp_path, capsys, extra=", groupId: analytics, maxRecordsPerBatch: 500")
    assert code == 0, out


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (", groupId: ''", "spec.sources[0].kafka.groupId: String should have at least 1 character"),
        (
            ", maxRecordsPerBatch: 0",
            "spec.sources[0].kafka.maxRecordsPerBatch: Input should be greater than or equal to 1",
        ),
        (", format: avro", "spec.sources[0].kafka.format: Input should be 'json' or 'csv'"),
    ],
)
def test_bad_kafka_settings_name_the_field(
    extra: str, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _check(tmp_path, capsys, extra=extra)
    assert code == 1
    assert expected in out, out


def test_a_kafka_source_read_twice_is_one_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sql = "SELECT a.url FROM clicks a JOIN clicks b ON a.url = b.url"
    code, out = _check(tmp_path, capsys, sql=sql)
    assert code == 1
    (line,) = out.splitlines()
    assert line.endswith(
        'Dataflow/feed: spec.sql: source "clicks": a kafka source may be read once by a '
        "dataflow, this SQL reads it 2 times; read it in a dataflow of its own and use that "
        "dataflow as the source"
    ), line


def test_the_default_batch_size_is_bounded() -> None:
    source = KafkaSource.model_validate({"bootstrapServers": "k", "topic": "t", "schema": "a INT"})
    assert source.group_id is None
    assert source.max_records_per_batch == 10_000
