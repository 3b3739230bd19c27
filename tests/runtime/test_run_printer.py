"""How ``run`` prints its Subscribes: a step's lines in time order, none lost to a kill."""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow as pa

from dataflow_operator.runtime.changelog_store import DIFF, TIME, ChangelogStore
from dataflow_operator.runtime.cli.printer import PRINTED_FILE, SubscribePrinter, printed_through


def _batch(store: ChangelogStore, batch: int, updates: list[tuple[int, int, str]]) -> None:
    """Record batch ``batch`` as the replica's sink does (its part, then the upper)."""
    table = pa.table(
        {
            "v": [v for _, _, v in updates],
            TIME: pa.array([t for t, _, _ in updates], pa.int64()),
            DIFF: pa.array([d for _, d, _ in updates], pa.int64()),
        }
    )
    store.write(batch, table, upper=max(t for t, _, _ in updates) + 1)


def test_a_steps_lines_come_in_time_order_across_batches_and_dataflows(tmp_path: Path) -> None:
    a, b, c = (ChangelogStore(tmp_path / name) for name in "abc")
    out = io.StringIO()
    printer = SubscribePrinter(out, ["a", "b"])
    for name, store in (("a", a), ("b", b), ("c", c)):
        printer.follow(name, store)
    _batch(b, 0, [(9, 1, "b9"), (5, 1, "b5")])
    _batch(b, 1, [(3, -1, "b3")])  # a stateful dataflow's timer batch: an earlier time
    _batch(a, 0, [(7, 1, "a7")])
    _batch(c, 0, [(1, 1, "not printed")])
    assert out.getvalue() == ""  # nothing before the step ends
    printer.flush()
    assert out.getvalue().splitlines() == [
        "b\t3\t-1\tb3",
        "b\t5\t1\tb5",
        "a\t7\t1\ta7",
        "b\t9\t1\tb9",
    ]
    printer.flush()  # nothing new: nothing again
    assert len(out.getvalue().splitlines()) == 4
    assert (printed_through(a), printed_through(b), printed_through(c)) == (0, 1, -1)
    alone = io.StringIO()
    printer = SubscribePrinter(alone, ["a"])
    only = ChangelogStore(tmp_path / "alone")
    printer.follow("a", only)
    _batch(only, 0, [(7, 1, "a7"), (3, -1, "a3")])
    printer.flush()
    assert alone.getvalue().splitlines() == ["3\t-1\ta3", "7\t1\ta7"]


def test_a_run_killed_before_its_step_ended_prints_the_committed_batches_when_restarted(
    tmp_path: Path,
) -> None:
    store = ChangelogStore(tmp_path / "s")
    first = io.StringIO()
    printer = SubscribePrinter(first, ["s"])
    printer.follow("s", store)
    _batch(store, 0, [(1, 1, "one")])
    printer.flush()
    _batch(store, 1, [(2, 1, "two")])  # committed; the run is killed before its step ends
    assert first.getvalue().splitlines() == ["1\t1\tone"]
    again = io.StringIO()
    restarted = SubscribePrinter(again, ["s"])
    restarted.follow("s", ChangelogStore(tmp_path / "s"))
    restarted.flush()  # as the run starts again
    assert again.getvalue().splitlines() == ["2\t1\ttwo"]  # before any new batch
    _batch(store, 2, [(3, 1, "three")])
    restarted.flush()
    assert again.getvalue().splitlines() == ["2\t1\ttwo", "3\t1\tthree"]


def test_a_changelog_started_over_or_without_a_record_is_printed_from_its_beginning(
    tmp_path: Path,
) -> None:
    store = ChangelogStore(tmp_path / "s")
    _batch(store, 0, [(1, 1, "one")])
    store.location.child(PRINTED_FILE).write_text("not json")
    out = io.StringIO()
    printer = SubscribePrinter(out, ["s"])
    printer.follow("s", store)
    printer.flush()
    assert out.getvalue().splitlines() == ["1\t1\tone"]
    assert printed_through(store) == 0
