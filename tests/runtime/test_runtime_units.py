"""Unit tests of the runtime's pure parts: values, clock, changelog store, SQL rewrites."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.types import StringType, StructField, StructType

from dataflow_operator.runtime.changelog_store import ChangelogStore, consolidate
from dataflow_operator.runtime.clock import ClockFile, TickPlan
from dataflow_operator.runtime.errors import PythonRaise, is_data_error, one_line
from dataflow_operator.runtime.inserts import insert_rows
from dataflow_operator.runtime.sources.logs import HeldInput, list_data_files
from dataflow_operator.runtime.sources.reader import ChangelogReader
from dataflow_operator.runtime.storage import Location
from dataflow_operator.runtime.values import (
    BadValue,
    convert,
    convert_row,
    format_update,
    iter_json_lines,
)


def test_values_are_read_by_spark_type() -> None:
    moment = convert("2026-01-01T00:00:00Z", "timestamp")
    assert moment == dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    assert convert(1767225600000, "timestamp") == moment
    assert convert("7", "bigint") == 7
    assert convert("1.5", "decimal(10,2)") == Decimal("1.5")
    assert convert("true", "boolean") is True
    assert convert(None, "int") is None
    with pytest.raises(BadValue):
        convert(1.5, "bigint")
    with pytest.raises(BadValue, match="column n"):
        convert_row({"n": "x"}, [("n", "bigint")])
    assert convert_row({"A": 1}, [("a", "int"), ("b", "string")]) == (1, None)


def test_an_integer_outside_its_type_s_range_is_a_bad_value_naming_the_column() -> None:
    assert convert(2**63 - 1, "bigint") == 2**63 - 1
    assert convert(-(2**31), "int") == -(2**31)
    with pytest.raises(BadValue, match=r"column n: cannot read 9\.223372036854776e\+18 as bigint"):
        convert_row({"n": 2.0**63}, [("n", "bigint")])  # JSON's 9.223372036854776e18
    with pytest.raises(BadValue, match="out of range for integer"):
        convert(2**31, "integer")
    with pytest.raises(BadValue, match="out of range for tinyint"):
        convert(-129, "tinyint")


def _json_lines(text: str) -> list[dict[str, object]]:
    return list(iter_json_lines(text.splitlines(keepends=True), "f"))


def test_json_lines_and_their_errors() -> None:
    assert _json_lines('{"a": 1}\n\n{"a": 2}\n') == [{"a": 1}, {"a": 2}]
    assert _json_lines('\n[{"a": 1},\n {"a": 2}]\n') == [{"a": 1}, {"a": 2}]
    with pytest.raises(BadValue, match="f: line 2: not JSON"):
        _json_lines('{"a": 1}\n{oops\n')
    with pytest.raises(BadValue, match="f: expected a JSON array of objects"):
        _json_lines("[1, 2]")
    with pytest.raises(BadValue, match="f: not JSON"):
        _json_lines('[{"a": 1},')


def test_json_lines_are_parsed_as_they_are_read() -> None:
    def lines() -> Iterator[str]:
        yield '{"a": 1}\n'
        raise AssertionError("read past what was consumed")

    assert next(iter_json_lines(lines(), "f")) == {"a": 1}


def test_changelog_lines_are_tab_separated() -> None:
    moment = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    assert format_update(5, -1, (moment, "hello", None)) == (
        "5\t-1\t2026-01-01T00:00:00.000Z\thello\tNULL"
    )


def test_simulated_ticks_end_with_output_complete_to_until() -> None:
    plan = TickPlan(start=0, tick=10, until=25)
    assert list(plan.times()) == [0, 10, 20, 24]
    assert list(TickPlan(start=0, tick=10, until=20).times()) == [0, 10, 19]
    assert list(TickPlan(start=5, tick=10, batches=3).times()) == [5, 15, 25]


def test_clock_file_round_trip(tmp_path: Path) -> None:
    clock = ClockFile(Location.of(tmp_path / "clock.json"))
    assert clock.read() is None
    clock.write(42)
    assert (clock.read(), clock.round()) == (42, 0)
    clock.next_round()
    clock.write(43)  # a new time keeps the round: a source's offsets never go back
    assert (clock.read(), clock.round()) == (43, 1)


def test_wall_ticks_start_a_tick_apart_and_never_wait_after_a_long_batch() -> None:
    import time

    times = TickPlan(start=0, tick=200, simulated=False, batches=3).times()
    began = time.monotonic()
    next(times)
    time.sleep(0.15)  # a batch shorter than the tick: the next starts a tick after this one
    next(times)
    second = time.monotonic() - began
    time.sleep(0.3)  # a batch longer than the tick: the next starts at once
    before = time.monotonic()
    next(times)
    assert 0.19 <= second < 0.3
    assert time.monotonic() - before < 0.05


def test_a_wall_tick_comes_early_for_a_time_the_plan_is_woken_for() -> None:
    import time

    wake_at: list[int | None] = [None]
    times = TickPlan(start=0, tick=2000, simulated=False, batches=3).times(wake=lambda: wake_at[0])
    next(times)
    due = int(time.time() * 1000) + 300  # before the next tick, 2 s away
    wake_at[0] = due
    woken = next(times)
    assert due <= woken < due + 150  # the clock reads the time it woke for, not before
    wake_at[0] = woken - 1  # a time already past: the tick is a whole tick again
    began = time.monotonic()
    next(times)
    assert 1.9 <= time.monotonic() - began < 2.2


def test_insert_is_one_new_whole_file(tmp_path: Path) -> None:
    target = insert_rows(tmp_path / "t", [{"a": 1}, {"a": 2}])
    assert list_data_files(Location.of(tmp_path / "t")) == [target.name]
    assert [json.loads(line) for line in target.read_text().splitlines()] == [{"a": 1}, {"a": 2}]
    (tmp_path / "t" / ".in-progress.tmp").write_text("x")
    assert list_data_files(Location.of(tmp_path / "t")) == [target.name]


def test_store_records_parts_then_upper(tmp_path: Path) -> None:
    store = ChangelogStore(tmp_path / "cl")
    assert store.read_upper() is None
    table = pa.table({"a": ["x", "y"], "__time": [1, 2], "__diff": [1, 1]})
    store.write(0, table, upper=3)
    store.write(1, None, upper=5)
    store.write(2, pa.table({"a": ["x"], "__time": [6], "__diff": [-1]}), upper=7)
    upper = store.read_upper()
    assert upper is not None and (upper.upper, upper.batch) == (7, 2)
    assert [batch for batch, _ in store.parts()] == [0, 2]
    assert [batch for batch, _ in store.parts(after=0)] == [2]
    assert store.consolidated() == (["a"], [["y", 1]])
    assert store.consolidated(at=5) == (["a"], [["x", 1], ["y", 1]])


def test_consolidate_cancels_equal_updates() -> None:
    table = pa.table({"a": ["x", "x", "y"], "__time": [1, 1, 1], "__diff": [-1, 1, 2]})
    assert consolidate(table).to_pylist() == [{"a": "y", "__time": 1, "__diff": 2}]


def test_a_traceback_names_its_last_exception_and_resolves_its_class() -> None:
    text = (
        'Traceback (most recent call last):\n  File "x.py", line 1, in read\n'
        "    raise KeyError('k')\nKeyError: 'k'\n\nDuring handling of the above exception, "
        "another exception occurred:\n\nTraceback (most recent call last):\n  File x\n"
        "dataflow_operator.runtime.values.BadValue: a.json: row 3: not an integer\n SQLSTATE: 38000"
    )
    raised = PythonRaise.from_traceback(text)
    assert raised == PythonRaise(
        "dataflow_operator.runtime.values.BadValue", "a.json: row 3: not an integer"
    )
    assert raised.resolve() is BadValue and raised.is_data_error()
    assert PythonRaise("ConnectionResetError", "peer").resolve() is ConnectionResetError
    assert not PythonRaise("ConnectionResetError", "peer").is_data_error()
    assert PythonRaise("not_loaded_module.Error", "x").resolve() is None
    assert PythonRaise.from_traceback("Python worker failed to connect back.") is None


def test_errors_outside_spark_are_their_first_line_and_data_errors_by_class() -> None:
    assert one_line(RuntimeError("\nfirst line\nsecond")) == "first line"
    assert one_line(RuntimeError()) == "RuntimeError"
    assert one_line(BadValue("row 1: not an integer")) == "row 1: not an integer"
    assert is_data_error(BadValue("row 1")) and is_data_error(FileNotFoundError("a.json"))
    assert not is_data_error(RuntimeError("Python worker failed to connect back"))
    assert not is_data_error(ConnectionResetError("peer"))


def test_a_changelog_reader_holds_back_files_at_or_past_the_expiration(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    for name, time in (("a.json", 100), ("b.json", 2000), ("c.json", 150)):
        (data / name).write_text(json.dumps({"v": name, "time": time, "diff": 1}) + "\n")
    schema = StructType([StructField("v", StringType())])

    def reader(logs: str, expiration: int) -> ChangelogReader:
        options = {"kind": "changelog", "path": str(data), "log_dir": str(tmp_path / logs)}
        options |= {"format": "json", "until": "-1", "expiration": str(expiration)}
        return ChangelogReader(options, schema)

    held = reader("held", 1000)
    offset = held.latestOffset(held.initialOffset())
    assert (offset["upper"], offset["seq"]) == (101, 1)  # b.json and all after it wait
    assert HeldInput.read(Location.of(tmp_path / "held")) == HeldInput("b.json", 2000, 1000)

    free = reader("free", -1)  # no expiration: everything is read
    offset = free.latestOffset(free.initialOffset())
    assert (offset["upper"], offset["seq"]) == (2001, 3)
    assert HeldInput.read(Location.of(tmp_path / "free")) is None


def test_step_levels_put_each_dataflow_after_what_it_reads() -> None:
    from types import SimpleNamespace

    from dataflow_operator.runtime.engine.levels import step_levels

    def dataflow(name: str, *reads: str) -> Any:
        return SimpleNamespace(name=name, settings=SimpleNamespace(reads=reads))

    work = [
        (dataflow("a"), 1),
        (dataflow("b"), 2),
        (dataflow("c", "a"), 3),
        (dataflow("d", "c", "b"), 4),
        (dataflow("e", "gone"), 5),  # reads a dataflow not stepped: nothing to wait for
    ]
    levels = step_levels(work)
    assert [[(r.name, t) for r, t in level] for level in levels] == [
        [("a", 1), ("b", 2), ("e", 5)],
        [("c", 3)],
        [("d", 4)],
    ]


def test_a_query_on_a_local_checkpoint_uses_the_file_system_checkpoint_manager() -> None:
    from dataflow_operator.runtime.engine.query_conf import (
        CHECKPOINT_FILE_MANAGER,
        LOCAL_CHECKPOINT_FILE_MANAGER,
        query_conf,
    )

    local = query_conf(Location.of("/state/dataflows/d/checkpoint"), 3)
    assert local[CHECKPOINT_FILE_MANAGER] == LOCAL_CHECKPOINT_FILE_MANAGER
    assert local["spark.sql.shuffle.partitions"] == "3"
    remote = query_conf(Location.of("s3a://bucket/state/dataflows/d/checkpoint"), 3)
    assert CHECKPOINT_FILE_MANAGER not in remote  # Spark's default: FileContext's renames


def test_a_checkpoint_of_another_state_format_starts_over(tmp_path: Path) -> None:
    from dataflow_operator.api.dataflow import DataflowSpec
    from dataflow_operator.runtime.engine.install import DataflowStarter, state_fingerprint
    from dataflow_operator.runtime.engine.layout import DataflowLayout

    spec = DataflowSpec.model_validate(
        {
            "cluster": "c",
            "kind": "Index",
            "sources": [
                {"name": "t", "table": {"path": str(tmp_path / "t"), "schema": "n BIGINT"}}
            ],
            "sql": "SELECT n, count(*) AS c FROM t GROUP BY n",
        }
    )
    layout = DataflowLayout.of(Location.of(tmp_path / "state"), "d")
    layout.root.make_dirs()
    assert not DataflowStarter.spec_changed(layout, spec)  # nothing there yet
    layout.spec_file.write_text(state_fingerprint(spec))
    assert not DataflowStarter.spec_changed(layout, spec)
    # Written by the runtime before the aggregate's totals were chunked: the spec alone.
    layout.spec_file.write_text(spec.model_dump_json(by_alias=True))
    assert DataflowStarter.spec_changed(layout, spec)
