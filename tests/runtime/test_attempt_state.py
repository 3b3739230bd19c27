"""A make-before-break successor removes every attempt's state but its own and its
predecessor's."""

from __future__ import annotations

from pathlib import Path

from dataflow_operator.runtime.engine.attempt_state import prune_attempt_states
from dataflow_operator.runtime.storage import Location


def _state(root: Path, *dirs: str) -> None:
    for relative in dirs:
        (root / relative).mkdir(parents=True)
        (root / relative / "spec.json").write_text("{}")


def test_a_successor_keeps_its_predecessors_state_and_its_own(tmp_path: Path) -> None:
    _state(tmp_path, "dataflows/df1", "attempts/2/dataflows/df1", "attempts/3", "attempts/4")
    removed = prune_attempt_states(Location.of(tmp_path / "attempts" / "4"), "attempts/3")
    assert sorted(removed) == ["attempts/2", "dataflows"]
    assert sorted(p.name for p in (tmp_path / "attempts").iterdir()) == ["3", "4"]
    assert not (tmp_path / "dataflows").exists()


def test_a_first_successor_keeps_the_roots_state(tmp_path: Path) -> None:
    """The predecessor broke before making (or was the first attempt): its state is the root's."""
    _state(tmp_path, "dataflows/df1", "attempts/1")
    removed = prune_attempt_states(Location.of(tmp_path / "attempts" / "2"), "")
    assert removed == ["attempts/1"]
    assert (tmp_path / "dataflows" / "df1" / "spec.json").exists()


def test_state_that_is_not_an_attempts_own_is_left_alone(tmp_path: Path) -> None:
    _state(tmp_path, "dataflows/df1", "attempts/1")
    assert prune_attempt_states(Location.of(tmp_path), "") == []
    assert (tmp_path / "attempts" / "1").exists()
