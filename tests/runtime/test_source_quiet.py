"""Whether a source has anything new: from the driver (``sources/quiet.py``), and its
reader's wait while it has nothing (``sources/reader.py``). No Spark."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.types import LongType, StructField
from tests.runtime.source_rows import source_schema

from dataflow_operator.runtime.changelog_store import ChangelogStore
from dataflow_operator.runtime.clock import ClockFile
from dataflow_operator.runtime.sources import reader as reader_module
from dataflow_operator.runtime.sources.logs import FILES_LOG
from dataflow_operator.runtime.sources.options import SourceOptions
from dataflow_operator.runtime.sources.quiet import quiet_upper
from dataflow_operator.runtime.sources.reader import ChangelogReader
from dataflow_operator.runtime.storage import Location

NOW = 1_000_000


def _options(tmp_path: Path, kind: str, **extra: str) -> SourceOptions:
    data, logs = tmp_path / "data", tmp_path / "logs"
    data.mkdir(parents=True, exist_ok=True)
    logs.mkdir(parents=True, exist_ok=True)
    return SourceOptions({"kind": kind, "path": str(data), "log_dir": str(logs), **extra})


def _taken(tmp_path: Path, *names: str) -> None:
    """The reader has listed ``names`` (its files log)."""
    lines = "".join(f"{name}\t1\n" for name in names)
    (tmp_path / "logs" / FILES_LOG).write_text(lines)


def test_a_table_without_new_files_reaches_the_clock(tmp_path: Path) -> None:
    options = _options(tmp_path, "table")
    (tmp_path / "data" / "a.json").write_text("{}\n")
    (tmp_path / "data" / "notes.txt").write_text("not rows: its reader skips it\n")
    _taken(tmp_path, "a.json")
    assert quiet_upper(options, {"upper": 500, "seq": 1}, NOW) == NOW + 1
    # an upper already past the clock stays
    assert quiet_upper(options, {"upper": NOW + 5, "seq": 1}, NOW) == NOW + 5


def test_a_table_file_not_taken_is_new(tmp_path: Path) -> None:
    options = _options(tmp_path, "table")
    (tmp_path / "data" / "a.json").write_text("{}\n")
    assert quiet_upper(options, {"upper": 500, "seq": 0}, NOW) is None  # not listed yet
    _taken(tmp_path, "a.json")
    assert quiet_upper(options, {"upper": 500, "seq": 0}, NOW) is None  # listed, not read


def test_files_count_every_name_as_data(tmp_path: Path) -> None:
    options = _options(tmp_path, "files", format="csv")
    (tmp_path / "data" / "a.csv").write_text("x\n")
    assert quiet_upper(options, {"upper": 500, "seq": 0}, NOW) is None
    _taken(tmp_path, "a.csv")
    assert quiet_upper(options, {"upper": 500, "seq": 1}, NOW) == NOW + 1


def test_a_changelog_moves_only_with_its_files_producer_or_lateness(tmp_path: Path) -> None:
    options = _options(tmp_path, "changelog")
    offset = {"upper": 700, "seq": 0}
    assert quiet_upper(options, offset, NOW) == 700  # its own times: the clock moves nothing
    (tmp_path / "data" / "_upper.json").write_text(json.dumps({"upper": 700}))
    assert quiet_upper(options, offset, NOW) == 700
    (tmp_path / "data" / "_upper.json").write_text(json.dumps({"upper": 800}))
    assert quiet_upper(options, offset, NOW) is None  # its producer moved on
    late = _options(tmp_path / "late", "changelog", lateness="1000")
    assert quiet_upper(late, {"upper": NOW - 999, "seq": 0}, NOW) == NOW - 999
    assert quiet_upper(late, {"upper": NOW - 1000, "seq": 0}, NOW) is None  # the clock moved it
    (tmp_path / "data" / "b.json").write_text("{}\n")
    assert quiet_upper(options, {"upper": 800, "seq": 0}, NOW) is None  # a new file


def test_a_dataflow_source_follows_its_upstream(tmp_path: Path) -> None:
    options = _options(tmp_path, "dataflow")
    store = ChangelogStore(tmp_path / "data")
    offset = {"upper": 600, "seq": 3}
    assert quiet_upper(options, offset, NOW) == 600  # nothing written upstream yet
    store.write_upper(3, 900)  # the upstream moved its frontier without a batch
    assert quiet_upper(options, offset, NOW) == 900
    store.write_upper(4, 950)  # a batch it has not read
    assert quiet_upper(options, offset, NOW) is None


def test_a_kafka_source_is_never_known_quiet(tmp_path: Path) -> None:
    options = _options(tmp_path, "kafka", topic="t", bootstrap_servers="127.0.0.1:1")
    assert quiet_upper(options, {"upper": 600, "seq": 0}, NOW) is None


def _table_reader(tmp_path: Path) -> tuple[ChangelogReader, ClockFile, Path]:
    (tmp_path / "data").mkdir()
    clock = ClockFile(Location.of(tmp_path / "clock.json"))
    marker = tmp_path / "dropped"
    options = {"kind": "table", "path": str(tmp_path / "data"), "log_dir": str(tmp_path / "logs")}
    options |= {"clock": clock.location.uri, "dropped_marker": str(marker)}
    return ChangelogReader(options, source_schema(StructField("id", LongType()))), clock, marker


def _later(seconds: float, action: Callable[[], object]) -> None:
    threading.Timer(seconds, action).start()


@pytest.mark.slow
def test_an_idle_reader_waits_for_the_clock_instead_of_answering_spark_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reader_module, "IDLE_WAIT", 3.0)
    reader, clock, marker = _table_reader(tmp_path)
    clock.write(NOW)
    offset = reader.latestOffset(reader.initialOffset())
    assert offset["upper"] == NOW + 1  # the clock moved: a batch

    def timed(start: dict[str, Any]) -> tuple[dict[str, Any], float]:
        began = time.monotonic()
        answer = reader.latestOffset(start)
        return answer, time.monotonic() - began

    # The first answer with nothing new comes at once (the batch's end is known)…
    assert timed(offset)[1] < 1.0
    # …the next waits until the clock moves, and takes the new time.
    _later(0.5, lambda: clock.write(NOW + 1000))
    answer, took = timed(offset)
    assert answer["upper"] == NOW + 1001 and 0.5 <= took < 2.5
    # A moved clock without anything new for the source (another round asked of
    # another source at the same time) ends a wait with the same offset.
    assert timed(answer)[1] < 1.0  # at once: the first with nothing new
    _later(0.5, lambda: (tmp_path / "other").write_text(""))  # not the clock: no end
    unchanged, took = timed(answer)
    assert unchanged == answer and took >= 3.0  # waited all of IDLE_WAIT, then answered
    # A poke (the engine waits on the query: see ClockFile.poking) ends a wait at once,
    # with nothing new.
    _later(0.5, clock.poke)
    unchanged, took = timed(answer)
    assert unchanged == answer and 0.5 <= took < 2.5
    assert clock.read() == NOW + 1000 and clock.round() == 0  # the clock itself is as it was
    # A dropped dataflow's reader stops waiting at once.
    _later(0.5, marker.touch)
    unchanged, took = timed(answer)
    assert unchanged == answer and 0.5 <= took < 2.5
