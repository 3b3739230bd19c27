"""A kafka source's client configuration for a secured broker: built from its properties
and the replica's environment, the same for the reader's consumer and the admin client
that commits its group, with only the variables' names in Spark's options."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import cast

import pytest
from pyspark.sql import SparkSession

from dataflow_operator.api.dataflow import (
    DEFAULT_MAX_RECORDS_PER_BATCH,
    KAFKA_OWNED_PROPERTIES,
    Source,
)
from dataflow_operator.core.time import Frontier
from dataflow_operator.runtime.engine.config import EngineConfig
from dataflow_operator.runtime.engine.install import DataflowStarter, _reads_alike
from dataflow_operator.runtime.engine.kafka_commit import (
    ConfluentAdmin,
    GroupCommitter,
    admin_config,
)
from dataflow_operator.runtime.engine.layout import DataflowLayout
from dataflow_operator.runtime.sources import kafka
from dataflow_operator.runtime.sources.kafka_client import (
    ConfluentReader,
    KafkaFailure,
    consumer_settings,
)
from dataflow_operator.runtime.sources.kafka_config import (
    client_config,
    decode_properties,
    encode_properties,
)
from dataflow_operator.runtime.sources.options import SourceOptions
from dataflow_operator.runtime.storage import Location

PROPERTIES = {
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "SCRAM-SHA-512",
    "ssl.ca.location": "/etc/kafka-ca/ca.crt",
}
FROM_ENV = {"sasl.username": "KAFKA_USERNAME", "sasl.password": "KAFKA_PASSWORD"}
ENV = {"KAFKA_USERNAME": "reader", "KAFKA_PASSWORD": "hunter2"}
SECURITY = {**PROPERTIES, "sasl.username": "reader", "sasl.password": "hunter2"}


def _source(
    properties: Mapping[str, str] = PROPERTIES, from_env: Mapping[str, str] = FROM_ENV
) -> Source:
    kafka_settings = {
        "bootstrapServers": "broker:9093",
        "topic": "orders",
        "schema": "id BIGINT, amount DOUBLE",
        "properties": dict(properties),
        "propertiesFromEnv": dict(from_env),
    }
    return Source.model_validate({"name": "orders", "kafka": kafka_settings})


def _options(tmp_path: Path, source: Source) -> dict[str, str]:
    """The string options the engine gives the source's reader (no Spark session needed)."""
    starter = DataflowStarter(cast(SparkSession, None), EngineConfig(tmp_path, 0))
    layout = DataflowLayout.of(Location.of(tmp_path), "d")
    found = starter._source_input(
        layout, 0, source, Frontier.empty(), lambda name: "unused", cluster="c"
    )
    return found.options


class RecordingAdmin:
    """A GroupAdmin that remembers nothing but succeeds."""

    def committed(self, group: str, topic: str) -> dict[int, int]:
        return {}

    def commit(self, group: str, topic: str, offsets: Mapping[int, int]) -> None:
        pass

    def close(self) -> None:
        pass


def test_properties_and_the_environment_are_merged_and_the_source_keeps_its_own() -> None:
    owned = consumer_settings("broker:9093", "g")
    config = client_config(
        "orders",
        owned,
        {**PROPERTIES, "group.id": "stolen", "bootstrap.servers": "elsewhere:1"},
        {**FROM_ENV, "enable.auto.commit": "AUTO_COMMIT"},
        environ={**ENV, "AUTO_COMMIT": "true"},
    )
    assert config == {**SECURITY, **owned}
    assert config["group.id"] == "g" and config["enable.auto.commit"] is False


def test_a_missing_variable_names_the_topic_the_property_and_the_variable() -> None:
    with pytest.raises(KafkaFailure) as raised:
        client_config("orders", {}, PROPERTIES, FROM_ENV, environ={"KAFKA_USERNAME": "u"})
    assert str(raised.value) == (
        "topic 'orders': propertiesFromEnv.sasl.password: environment variable "
        "KAFKA_PASSWORD is not set on this replica (set it in the Replica's spec.env)"
    )


def test_the_api_refuses_exactly_what_the_clients_set_themselves() -> None:
    assert set(consumer_settings("k", "g")) == set(KAFKA_OWNED_PROPERTIES)
    assert "bootstrap.servers" in KAFKA_OWNED_PROPERTIES  # the admin client's one setting


def test_the_readers_default_batch_size_is_the_apis(tmp_path: Path) -> None:
    options = SourceOptions({"kind": "kafka", "log_dir": str(tmp_path)})
    assert options.max_records == DEFAULT_MAX_RECORDS_PER_BATCH


def test_property_maps_round_trip_through_a_string_option() -> None:
    assert decode_properties(encode_properties(PROPERTIES), "kafka_properties") == PROPERTIES
    assert decode_properties("", "kafka_properties") == {}
    with pytest.raises(ValueError, match="option kafka_properties: expected a JSON object"):
        decode_properties('["a"]', "kafka_properties")


def test_only_the_variables_names_travel_in_the_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    options = _options(tmp_path, _source())
    assert not any("hunter2" in value for value in options.values())
    read = SourceOptions(options)
    assert read.kafka_properties == PROPERTIES
    assert read.kafka_properties_from_env == FROM_ENV


def test_the_reader_and_the_group_commit_connect_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    source = _source()
    made: dict[str, dict[str, str | bool]] = {}

    class CapturingReader:
        def __init__(self, topic: str, config: Mapping[str, str | bool]) -> None:
            made["reader"] = dict(config)

    monkeypatch.setattr(kafka, "ConfluentReader", CapturingReader)
    kafka.open_reader(SourceOptions(_options(tmp_path, source)))

    def connect(servers: str, config: dict[str, str | bool]) -> RecordingAdmin:
        made["admin"] = dict(config)
        return RecordingAdmin()

    GroupCommitter(connect, synchronous=True).commit_source(
        source, "c", ("d", "orders"), {0: 1}, {0: 1}
    )
    reader, admin = made["reader"], made["admin"]
    assert {k: v for k, v in reader.items() if k not in KAFKA_OWNED_PROPERTIES} == SECURITY
    assert {k: v for k, v in admin.items() if k not in KAFKA_OWNED_PROPERTIES} == SECURITY
    assert reader["bootstrap.servers"] == admin["bootstrap.servers"] == "broker:9093"
    assert reader["group.id"] == "dataflow.c.d.orders"


def test_sources_with_other_credentials_get_their_own_admin_client() -> None:
    made: list[dict[str, str | bool]] = []

    def connect(servers: str, config: dict[str, str | bool]) -> RecordingAdmin:
        made.append(config)
        return RecordingAdmin()

    committer = GroupCommitter(connect, synchronous=True)
    first = _source(from_env={"sasl.username": "USER_A", "sasl.password": "PASSWORD_A"})
    second = _source(from_env={"sasl.username": "USER_B", "sasl.password": "PASSWORD_B"})
    env = {"USER_A": "a", "PASSWORD_A": "pa", "USER_B": "b", "PASSWORD_B": "pb"}
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        for source in (first, second, first):
            committer.commit_source(source, "c", ("d", "orders"), {0: 1}, {0: 1})
    assert [config["sasl.username"] for config in made] == ["a", "b"]


def test_a_variable_missing_fails_the_commit_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAFKA_PASSWORD", raising=False)
    monkeypatch.setenv("KAFKA_USERNAME", "reader")
    committer = GroupCommitter(lambda servers, config: RecordingAdmin(), synchronous=True)
    with pytest.raises(
        KafkaFailure,
        match=r"propertiesFromEnv\.sasl\.password: environment variable KAFKA_PASSWORD",
    ):
        committer.commit_source(_source(), "c", ("d", "orders"), {0: 1}, {0: 1})
    with pytest.raises(KafkaFailure, match="KAFKA_PASSWORD"):
        admin_config(_source(), environ={"KAFKA_USERNAME": "reader"})


def test_the_configuration_reaches_the_real_clients() -> None:
    """confluent-kafka refuses an unknown SASL mechanism when the client is made: the
    reader's and the admin client's configuration got to librdkafka (no broker needed)."""
    bogus = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "BOGUS"}
    config = client_config("orders", consumer_settings("127.0.0.1:1", "g"), bogus, {})
    with pytest.raises(KafkaFailure, match=r"topic 'orders': .*Unsupported SASL mechanism: BOGUS"):
        ConfluentReader("orders", config)
    source = _source(properties=bogus, from_env={})
    with pytest.raises(KafkaFailure, match=r"Unsupported SASL mechanism: BOGUS"):
        ConfluentAdmin("127.0.0.1:1", admin_config(source))


def test_a_source_recorded_before_the_properties_existed_reads_alike() -> None:
    """A start-over keeps a kafka source's ingested collection when its settings are the
    same: the fields added since it was recorded read back as their defaults."""
    recorded = (
        '{"name":"orders","table":null,"files":null,"changelog":null,"dataflow":null,'
        '"kafka":{"bootstrapServers":"broker:9093","topic":"orders","format":"json",'
        '"schema":"id BIGINT, amount DOUBLE","groupId":null,"maxRecordsPerBatch":10000},'
        '"timeline":null}'
    )
    assert _reads_alike(recorded, _source(properties={}, from_env={}))
    assert not _reads_alike(recorded, _source())


def test_a_source_read_in_batches_of_another_size_reads_alike() -> None:
    """Which records a kafka source reads, and at which times, does not depend on its
    batch size (recorded with the old default of 10,000, or set by hand)."""
    source = _source(properties={}, from_env={})
    assert source.kafka is not None
    smaller = source.kafka.model_copy(update={"max_records_per_batch": 500})
    recorded = source.model_copy(update={"kafka": smaller}).model_dump_json(by_alias=True)
    assert _reads_alike(recorded, source)
    other = source.kafka.model_copy(update={"topic": "payments"})
    assert not _reads_alike(source.model_copy(update={"kafka": other}).model_dump_json(), source)


def test_what_is_not_a_recorded_source_never_reads_alike() -> None:
    assert not _reads_alike("{not json", _source())
    assert not _reads_alike(None, _source())
