"""Starting Spark is told as it happens: a line before, a line once it is up, and on a
terminal a spinner in between."""

from __future__ import annotations

import io
import re
import time

import pytest

from dataflow_operator.runtime.cli.progress import starting_spark


def test_starting_spark_says_when_it_starts_and_when_it_is_up() -> None:
    err = io.StringIO()
    seen: list[str] = []

    def start() -> str:
        seen.append(err.getvalue())  # what was told before Spark started
        return "session"

    ticks = iter([10.0, 17.25])
    assert starting_spark("local[2]", start, err, spinner=False, clock=lambda: next(ticks)) == (
        "session"
    )
    assert seen == ["starting Spark (local[2])…\n"]
    assert err.getvalue().splitlines() == [
        "starting Spark (local[2])…",
        "Spark is up (local[2], 7.2 s)",
    ]


def test_on_a_terminal_a_spinner_turns_until_spark_is_up() -> None:
    err = io.StringIO()
    starting_spark("local[2]", lambda: time.sleep(0.5), err, spinner=True)
    first, *redrawn = err.getvalue().split("\r")
    assert first == "starting Spark (local[2])…"
    frames = {line[0] for line in redrawn[:-1]}
    assert len(frames) >= 2 and frames <= set("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")  # it turns
    assert all(line[1:].startswith(" starting Spark (local[2])… ") for line in redrawn[:-1])
    assert re.fullmatch(
        r"starting Spark \(local\[2\]\)…\033\[K\nSpark is up \(local\[2\], \d+\.\d s\)\n",
        redrawn[-1],
    )


def test_a_failed_start_is_not_told_as_up() -> None:
    err = io.StringIO()

    def start() -> None:
        raise RuntimeError("no Java")

    with pytest.raises(RuntimeError, match="no Java"):
        starting_spark("local[2]", start, err, spinner=False)
    assert "Spark is up" not in err.getvalue()
