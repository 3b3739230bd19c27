"""Releasing consumed files and compacting ingested collections, on state written by hand
(Spark's commit and offset logs as the engine reads them)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from dataflow_operator.api.dataflow import Source
from dataflow_operator.core.changelog import DIFF, TIME
from dataflow_operator.runtime.changelog_store import ChangelogStore
from dataflow_operator.runtime.engine import release as release_module
from dataflow_operator.runtime.engine.committed import committed_offsets
from dataflow_operator.runtime.engine.output_compaction import compact_output
from dataflow_operator.runtime.engine.release import Releaser, SourceReader
from dataflow_operator.runtime.sources.ingested import IngestedCollection, IngestedUpper
from dataflow_operator.runtime.storage import Location

FILES = ["a.json", "b.json", "c.json"]


def _source(directory: Path, clean: str = "Delete", archive: Path | None = None) -> Source:
    files = {"path": str(directory), "format": "json", "schema": "id INT", "cleanSource": clean}
    if archive is not None:
        files["archivePath"] = str(archive)
    return Source.model_validate({"name": "events", "files": files})


def _reader(root: Path, name: str, source: Source, committed: int | None) -> SourceReader:
    """A reader whose files log lists FILES (the i-th first listed at (i + 1) × 100 ms) and
    whose last committed batch read the first ``committed`` of them."""
    state = root / name
    logs = state / "sources" / "events"
    logs.mkdir(parents=True)
    (logs / "files.log").write_text("".join(f"{f}\t{(i + 1) * 100}\n" for i, f in enumerate(FILES)))
    checkpoint = state / "checkpoint"
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "commits").mkdir()
    if committed is not None:
        offset = {"upper": 1000 + committed, "seq": committed, "source": 0}
        offset |= {"until": -1, "listed": committed * 100}
        other = {"upper": 5, "seq": 0, "until": -1, "source": 1}
        (checkpoint / "offsets" / "3").write_text(
            f"v1\n{{}}\n{json.dumps(other)}\n{json.dumps(offset)}\n"
        )
        (checkpoint / "commits" / "3").write_text("v1\n{}\n")
        # A batch planned but not committed yet does not count.
        later = {**offset, "seq": len(FILES)}
        (checkpoint / "offsets" / "4").write_text(f"v1\n{{}}\n{json.dumps(later)}\n")
    return SourceReader(name, source, 0, Location.of(logs), Location.of(checkpoint))


def _upstream(tmp_path: Path) -> Path:
    directory = tmp_path / "upstream"
    directory.mkdir()
    for name in FILES:
        (directory / name).write_text('{"id": 1}\n')
    return directory


def test_the_committed_offset_is_the_last_committed_batch_s_by_source_index(
    tmp_path: Path,
) -> None:
    reader = _reader(tmp_path, "d", _source(tmp_path), committed=2)
    found = committed_offsets(reader.checkpoint)
    assert (found[0].seq, found[0].upper) == (2, 1002)
    assert (found[1].seq, found[1].upper) == (0, 5)


def test_released_files_are_exactly_those_below_the_frontier(tmp_path: Path) -> None:
    upstream = _upstream(tmp_path)
    reader = _reader(tmp_path, "d", _source(upstream), committed=2)
    releaser = Releaser(own_cluster=True)
    releaser.step([reader], force=True)
    assert sorted(p.name for p in upstream.iterdir()) == ["c.json"]
    (report,) = releaser.reports("d")
    assert (report.offset, report.released_files, report.resumption_frontier) == (2, 2, [1002])


def test_a_directory_read_by_two_dataflows_is_released_past_the_slower(tmp_path: Path) -> None:
    upstream = _upstream(tmp_path)
    fast = _reader(tmp_path, "fast", _source(upstream), committed=3)
    slow = _reader(tmp_path, "slow", _source(upstream), committed=1)
    Releaser(own_cluster=True).step([fast, slow], force=True)
    assert sorted(p.name for p in upstream.iterdir()) == ["b.json", "c.json"]


def test_a_reader_that_committed_nothing_holds_everything_back(tmp_path: Path) -> None:
    upstream = _upstream(tmp_path)
    done = _reader(tmp_path, "done", _source(upstream), committed=3)
    new = _reader(tmp_path, "new", _source(upstream), committed=None)
    Releaser(own_cluster=True).step([done, new], force=True)
    assert sorted(p.name for p in upstream.iterdir()) == FILES


def test_readers_that_disagree_on_clean_source_keep_the_files(tmp_path: Path) -> None:
    upstream = _upstream(tmp_path)
    deleting = _reader(tmp_path, "x", _source(upstream), committed=3)
    keeping = _reader(tmp_path, "y", _source(upstream, clean="Off"), committed=3)
    Releaser(own_cluster=True).step([deleting, keeping], force=True)
    assert sorted(p.name for p in upstream.iterdir()) == FILES


def test_a_replica_of_a_cluster_releases_only_below_the_cluster_s_meet(tmp_path: Path) -> None:
    upstream = _upstream(tmp_path)
    reader = _reader(tmp_path, "d", _source(upstream), committed=3)
    releaser = Releaser(own_cluster=False)
    releaser.step([reader], force=True)
    assert sorted(p.name for p in upstream.iterdir()) == FILES  # no meet sent yet
    (report,) = releaser.reports("d")
    assert (report.offset, report.listed) == (3, 300)  # what it tells the operator
    releaser.cluster = {("d", "events"): 250}  # another replica has listed up to 250 only
    releaser.step([reader], force=True)
    assert sorted(p.name for p in upstream.iterdir()) == ["c.json"]


def test_archive_keeps_the_name_and_a_failure_is_counted_then_retried(tmp_path: Path) -> None:
    upstream = _upstream(tmp_path)
    archive = tmp_path / "archive"
    archive.write_text("not a directory")
    reader = _reader(tmp_path, "d", _source(upstream, "Archive", archive), committed=1)
    releaser = Releaser(own_cluster=True)
    releaser.step([reader], force=True)
    (report,) = releaser.reports("d")
    assert (report.release_failures, report.released_files) == (1, 0)
    assert report.last_release_error is not None and "a.json" in report.last_release_error
    assert (upstream / "a.json").exists()

    archive.unlink()
    releaser.step([reader], force=True)
    (report,) = releaser.reports("d")
    assert (report.release_failures, report.released_files) == (1, 1)
    assert report.last_release_error is None
    assert (archive / "a.json").read_text() == '{"id": 1}\n'
    assert not (upstream / "a.json").exists()


def _updates(rows: list[tuple[int, int, int]]) -> pa.Table:
    ids, times, diffs = zip(*rows, strict=True)
    return pa.table(
        {
            "id": pa.array(ids, pa.int32()),
            TIME: pa.array(times, pa.int64()),
            DIFF: pa.array(diffs, pa.int64()),
        }
    )


def test_compaction_consolidates_below_since_and_keeps_later_parts(tmp_path: Path) -> None:
    collection = IngestedCollection(Location.of(tmp_path / "ingested"))
    collection.part(1, 0).write_parquet(_updates([(1, 10, 1), (2, 10, 1)]))
    collection.part(2, 0).write_parquet(_updates([(1, 20, -1), (3, 20, 1)]))
    collection.part(3, 0).write_parquet(_updates([(4, 30, 1)]))
    assert not collection.compact(2, since=25, after=3)  # two parts wait: not yet
    assert collection.compact(2, since=25, after=2)
    names = sorted(p.name for p in (tmp_path / "ingested").iterdir())
    assert names == ["part-000000000003-00000.parquet", "snapshot-000000000002.parquet"]
    everything = collection.read(3)
    assert everything is not None
    rows = sorted(zip(*(everything[c].to_pylist() for c in ("id", TIME, DIFF)), strict=True))
    assert rows == [(2, 25, 1), (3, 25, 1), (4, 30, 1)]  # 1 cancelled out
    assert collection.size().rows == 3


def test_a_growing_collection_rewrites_its_snapshot_once_it_has_grown_by_a_share(
    tmp_path: Path,
) -> None:
    collection = IngestedCollection(Location.of(tmp_path / "ingested"))
    collection.part(1, 0).write_parquet(_updates([(i, 10, 1) for i in range(4000)]))
    collection.part(2, 0).write_parquet(_updates([(4000, 20, 1)]))
    assert collection.compact(2, since=25, after=2)  # no snapshot yet: compacted
    for seq in range(3, 5):  # inserts far smaller than the snapshot wait
        collection.part(seq, 0).write_parquet(_updates([(seq * 10_000, 30, 1)]))
    snapshot = collection.location.child("snapshot-000000000002.parquet")
    assert not collection.compact(4, since=35, after=2)
    assert collection.files(4)[0].name == snapshot.name
    waiting = _updates([(i, 40, 1) for i in range(5000, 6000)])  # a share of it now
    assert 4 * sum(f.size() for f in collection.files(4)[1:]) < snapshot.size()
    collection.part(5, 0).write_parquet(waiting)
    assert collection.compact(5, since=45, after=2)
    assert [f.name for f in collection.files(5)] == ["snapshot-000000000005.parquet"]
    everything = collection.read(5)
    assert everything is not None and everything.num_rows == 4000 + 1 + 2 + 1000


def test_many_small_parts_are_compacted_whatever_their_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dataflow_operator.runtime import changelog_store

    monkeypatch.setattr(changelog_store, "MAX_WAITING_PARTS", 3)
    collection = IngestedCollection(Location.of(tmp_path / "ingested"))
    collection.part(1, 0).write_parquet(_updates([(i, 10, 1) for i in range(4000)]))
    collection.part(2, 0).write_parquet(_updates([(4000, 20, 1)]))
    assert collection.compact(2, since=25, after=2)
    for seq in range(3, 5):
        collection.part(seq, 0).write_parquet(_updates([(seq * 10_000, 30, 1)]))
    assert not collection.compact(4, since=35, after=2)
    collection.part(5, 0).write_parquet(_updates([(50_000, 40, 1)]))
    assert collection.compact(5, since=45, after=2)


def test_an_interrupted_compaction_leaves_files_that_are_ignored(tmp_path: Path) -> None:
    collection = IngestedCollection(Location.of(tmp_path / "ingested"))
    collection.part(1, 0).write_parquet(_updates([(1, 10, 1)]))
    collection.part(2, 0).write_parquet(_updates([(2, 20, 1)]))
    collection.location.child("snapshot-000000000001.parquet").write_parquet(
        _updates([(1, 15, 1)])
    )  # written; part 1 not removed yet
    assert [f.name for f in collection.files(2)] == [
        "snapshot-000000000001.parquet",
        "part-000000000002-00000.parquet",
    ]


def _store_with_batches(root: Path, batches: int) -> ChangelogStore:
    store = ChangelogStore(root / "changelog")
    for batch in range(batches):
        # Each batch inserts its row and deletes the previous batch's.
        rows = [(batch, batch * 10, 1)] + ([(batch - 1, batch * 10, -1)] if batch else [])
        store.write(batch, _updates(rows), upper=batch * 10 + 1)
    return store


def test_an_output_changelog_keeps_its_last_batches_and_a_snapshot(tmp_path: Path) -> None:
    store = _store_with_batches(tmp_path, 150)
    assert compact_output(store, downstream=[], keep=100) == 49
    names = [file.name for _, file in store.parts()]
    assert names[0] == "snapshot-000000000049.parquet"
    assert len(names) == 101  # the snapshot, then batches 50..149 as written
    snapshot = store.read(-1, 49)
    assert snapshot is not None
    assert snapshot.to_pylist() == [{"id": 49, TIME: 490, DIFF: 1}]  # the contents at 49
    assert store.consolidated(1490)[1] == [[149, 1]]  # the same contents as before
    assert compact_output(store, downstream=[], keep=100) is None  # nothing new to merge


def test_an_output_changelog_is_not_compacted_past_a_downstream_reader(tmp_path: Path) -> None:
    store = _store_with_batches(tmp_path, 150)
    assert compact_output(store, downstream=[30, 120], keep=100) == 30
    assert compact_output(_store_with_batches(tmp_path / "b", 150), downstream=[-1]) is None


def test_truncation_keeps_what_the_recorded_upper_covers(tmp_path: Path) -> None:
    collection = IngestedCollection(Location.of(tmp_path / "ingested"))
    collection.part(1, 0).write_parquet(_updates([(1, 10, 1)]))
    collection.part(2, 0).write_parquet(_updates([(2, 20, 1)]))  # not recorded yet
    assert not IngestedCollection(Location.of(tmp_path / "none")).truncate()
    collection.write_upper(IngestedUpper(seq=1, upper=11))
    assert collection.truncate()
    assert [f.name for f in collection.files(99)] == ["part-000000000001-00000.parquet"]
    unrecorded = IngestedCollection(Location.of(tmp_path / "unrecorded"))
    unrecorded.part(1, 0).write_parquet(_updates([(1, 10, 1)]))
    assert not unrecorded.truncate()
    assert unrecorded.files(99) == []  # nothing kept: all of it is read again upstream


def _table(directory: Path) -> Source:
    return Source.model_validate(
        {"name": "events", "table": {"path": str(directory), "schema": "id INT"}}
    )


def test_a_table_s_files_read_everywhere_are_folded_once_enough_wait(tmp_path: Path) -> None:
    from dataflow_operator.runtime.sources.table_folds import fold_records

    upstream = _upstream(tmp_path)
    fast = _reader(tmp_path, "fast", _table(upstream), committed=3)
    slow = _reader(tmp_path, "slow", _table(upstream), committed=2)
    releaser = Releaser(own_cluster=True)
    releaser.step([fast, slow])
    assert sorted(p.name for p in upstream.iterdir()) == FILES  # fewer than FOLD_FILES
    releaser.step([fast, slow], force=True)  # a forced release (a run's end) folds any
    assert sorted(p.name for p in upstream.glob("*.json")) == ["c.json"]  # past the slower
    rows = sorted(record["id"] for _, record in fold_records(Location.of(upstream), FILES[:2]))
    assert rows == [1, 1]
    assert [r.released_files for r in releaser.reports("fast")] == [2]


def test_a_replica_of_a_cluster_folds_a_table_without_the_cluster_s_meet(tmp_path: Path) -> None:
    upstream = _upstream(tmp_path)
    reader = _reader(tmp_path, "d", _table(upstream), committed=3)
    Releaser(own_cluster=False).step([reader], force=True)  # no meet sent: others read folds
    assert list(upstream.glob("*.json")) == []


def test_a_table_is_folded_again_only_once_enough_new_files_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dataflow_operator.runtime.engine import release

    upstream = _upstream(tmp_path)
    reader = _reader(tmp_path, "d", _table(upstream), committed=3)
    folds: list[list[str]] = []
    real = release.fold_table
    monkeypatch.setattr(release, "fold_table", lambda t, n: folds.append(list(n)) or real(t, n))
    monkeypatch.setattr(release, "FOLD_FILES", 2)
    releaser = Releaser(own_cluster=True)
    releaser.step([reader])
    releaser.step([reader])  # the files read stay in its log: not a reason to fold again
    assert folds == [FILES]


def test_releases_come_every_second_after_a_change_and_every_ten_while_idle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [100.0]
    monkeypatch.setattr(release_module.wall, "monotonic", lambda: now[0])
    releaser = Releaser(own_cluster=True)
    assert releaser.due()  # the first is due at once
    now[0] += 1.0
    assert not releaser.due()  # nothing changed since: not a second later…
    now[0] += 8.9
    assert not releaser.due()
    now[0] += 0.1
    assert releaser.due()  # …but ten seconds after the last
    releaser.changed()  # a batch ran, or the cluster's frontiers came
    now[0] += 0.5
    assert not releaser.due()
    now[0] += 0.5
    assert releaser.due()  # a second after the last
    now[0] += 1.0
    assert not releaser.due()  # idle again
    assert releaser.due(force=True)  # a forced release is always due
