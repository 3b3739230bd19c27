"""Locations: paths and URIs every pod reaches, read and written without ``open()``."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

from dataflow_operator.runtime.changelog_store import ChangelogStore, part_batch, part_name
from dataflow_operator.runtime.storage import Location, StorageError, hadoop_conf


def test_a_relative_path_is_resolved_where_the_location_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    location = Location.of("state/x")
    assert location.uri == (tmp_path / "state" / "x").as_uri()
    monkeypatch.chdir("/")  # an executor's other working directory
    assert location.local_path == tmp_path / "state" / "x"
    assert Location.of(location.uri) == location  # file:// URIs round-trip


def test_object_store_uris_are_kept_and_other_schemes_refused() -> None:
    assert Location.of("s3a://bucket/prefix/").uri == "s3a://bucket/prefix"
    assert Location.of("s3a://bucket/prefix").child("dataflows", "a").uri == (
        "s3a://bucket/prefix/dataflows/a"
    )
    assert Location.of("gs://b/p").local_path is None
    with pytest.raises(StorageError, match="unsupported scheme 'ftp'"):
        Location.of("ftp://host/x")


def test_text_is_replaced_atomically_and_lists_skip_hidden_and_in_progress(
    tmp_path: Path,
) -> None:
    directory = Location.of(tmp_path / "d")
    assert directory.list() == []
    assert not directory.exists()
    directory.child("a.json").write_text("one")
    directory.child("a.json").write_text("two")
    directory.child("_b.json").write_text("in progress")
    directory.child(".c.tmp").write_text("hidden")
    directory.child("sub", "e.json").write_text("nested")
    assert directory.child("a.json").read_text() == "two"
    assert directory.list() == ["a.json"]
    assert directory.list(directories=True) == ["sub"]
    assert sorted(os.listdir(tmp_path / "d")) == [".c.tmp", "_b.json", "a.json", "sub"]
    directory.child("log").append_text("x\n")
    directory.child("log").append_text("y\n")
    assert directory.child("log").read_text() == "x\ny\n"
    assert directory.child("missing").read_text_or_none() is None
    directory.delete()
    assert not directory.exists()
    directory.delete()  # nothing there is fine


def test_parquet_round_trip(tmp_path: Path) -> None:
    table = pa.table({"n": [1, 2], "s": ["a", "b"]})
    file = Location.of(tmp_path / "t.parquet")
    file.write_parquet(table)
    assert file.read_parquet().equals(table)
    batches = list(file.read_parquet_batches())
    assert pa.Table.from_batches(batches).equals(table)


def test_lines_are_read_as_they_are_consumed(tmp_path: Path) -> None:
    file = Location.of(tmp_path / "big.jsonl")
    file.write_text("héllo\r\nworld\nlast")
    assert list(file.read_lines()) == ["héllo\r\n", "world\n", "last"]
    lines = file.read_lines()
    assert next(lines) == "héllo\r\n"
    lines.close()  # a reader stopped early closes the file


def test_a_store_reads_every_part_of_a_batch_and_clears_an_interrupted_attempt(
    tmp_path: Path,
) -> None:
    store = ChangelogStore(tmp_path / "cl")
    one = pa.table({"n": [1], "__time": [10], "__diff": [1]})
    two = pa.table({"n": [2], "__time": [10], "__diff": [1]})
    store.part(0, 0).write_parquet(one)
    store.part(0, 3).write_parquet(two)
    store.write_upper(0, 11)
    store.part(1, 0).write_parquet(one)  # batch 1 is in progress: not visible
    assert [b for b, _ in store.parts()] == [0, 0]
    assert store.consolidated() == (["n"], [[1, 1], [2, 1]])
    store.clear(1)
    assert [part_batch(n) for n in store.location.list()] == [0, 0]
    assert part_batch(part_name(12, 4)) == part_batch(part_name(12)) == 12
    assert part_batch("_upper.json") is None


def test_s3a_with_an_endpoint_gives_hadoop_the_same_store() -> None:
    minio = {"AWS_ENDPOINT_URL": "http://minio.storage:9000"}
    assert hadoop_conf(Location.of("s3a://b/p"), minio) == {
        "spark.hadoop.fs.s3a.endpoint": "http://minio.storage:9000",
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
    }
    assert hadoop_conf(Location.of("s3a://b/p"), {}) == {}
    assert hadoop_conf(Location.of("/tmp/x"), minio) == {}
