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


SECURED = (
    ", properties: {security.protocol: SASL_SSL, sasl.mechanism: SCRAM-SHA-512, "
    "ssl.ca.location: /etc/kafka-ca/ca.crt}, "
    "propertiesFromEnv: {sasl.username: KAFKA_USERNAME, sasl.password: KAFKA_PASSWORD}"
)


def test_a_secured_broker_s_settings_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _check(tmp_path, capsys, extra=SECURED)
    assert code == 0, out


def test_sasl_username_may_be_a_plain_property() -> None:
    source = KafkaSource.model_validate(
        {
            "bootstrapServers": "k",
            "topic": "t",
            "schema": "a INT",
            "properties": {"sasl.username": "reader", "sasl.oauthbearer.token.endpoint.url": "u"},
        }
    )
    assert source.properties["sasl.username"] == "reader"


PROPERTIES_AT = "spec.sources[0].kafka.properties: "
FROM_ENV_AT = "spec.sources[0].kafka.propertiesFromEnv"


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (
            ", properties: {group.id: mine}",
            PROPERTIES_AT + "'group.id' is set by the source: use groupId",
        ),
        (
            ", properties: {bootstrap.servers: 'other:9092'}",
            PROPERTIES_AT + "'bootstrap.servers' is set by the source: use bootstrapServers",
        ),
        (
            ", properties: {enable.auto.commit: 'true'}",
            PROPERTIES_AT + "'enable.auto.commit' is set by the source",
        ),
        (
            ", properties: {auto.offset.reset: latest}",
            PROPERTIES_AT + "'auto.offset.reset' is set by the source",
        ),
        (
            ", properties: {Security.Protocol: SSL}",
            PROPERTIES_AT + "'Security.Protocol' is not a Kafka client property name",
        ),
        (
            ", properties: {sasl.password: hunter2}",
            PROPERTIES_AT + "'sasl.password' holds a secret: put it in propertiesFromEnv and "
            "set the variable from a Secret in the Replica's spec.env",
        ),
        (
            ", properties: {sasl.oauthbearer.client.secret: s}",
            PROPERTIES_AT + "'sasl.oauthbearer.client.secret' holds a secret",
        ),
        (
            ", properties: {sasl.jaas.config: 'x required;'}",
            PROPERTIES_AT + "'sasl.jaas.config' holds a secret",
        ),
        (
            ", properties: {ssl.key.pem: KEY}",
            PROPERTIES_AT + "'ssl.key.pem' holds a secret",
        ),
        (
            ", propertiesFromEnv: {group.id: GROUP}",
            FROM_ENV_AT + ": 'group.id' is set by the source: use groupId",
        ),
        (
            ", propertiesFromEnv: {sasl.password: kafka-password}",
            FROM_ENV_AT + ".sasl.password: 'kafka-password' is not an environment variable "
            "name (letters, digits and '_', not starting with a digit)",
        ),
        (
            ", properties: {sasl.mechanism: PLAIN}, propertiesFromEnv: {sasl.mechanism: M}",
            "spec.sources[0].kafka: 'sasl.mechanism' given in both properties and "
            "propertiesFromEnv: give each in one",
        ),
        (
            ", properties: {" + ", ".join(f"p{i}: v" for i in range(65)) + "}",
            "spec.sources[0].kafka.properties: Dictionary should have at most 64 items",
        ),
    ],
)
def test_bad_kafka_client_properties_name_the_field_and_the_reason(
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
    assert source.max_records_per_batch == 1_000_000
