"""Conditions keep their transition time until their status changes."""

from dataflow_operator.core.conditions import ConditionStatus, find_condition, set_condition


def test_transition_time_moves_only_on_status_change() -> None:
    first = set_condition([], type_="Ready", status=False, reason="Starting", message="", now=1_000)
    same = set_condition(
        first, type_="Ready", status=False, reason="Waiting", message="m", now=9_000
    )
    flipped = set_condition(
        same, type_="Ready", status=True, reason="Running", message="", now=20_000
    )
    assert find_condition(same, "Ready").last_transition_time == "1970-01-01T00:00:01Z"  # type: ignore[union-attr]
    assert find_condition(same, "Ready").reason == "Waiting"  # type: ignore[union-attr]
    ready = find_condition(flipped, "Ready")
    assert ready is not None and ready.status is ConditionStatus.TRUE
    assert ready.last_transition_time == "1970-01-01T00:00:20Z"


def test_conditions_stay_one_per_type_sorted() -> None:
    conditions = set_condition([], type_="Ready", status=True, reason="R", message="", now=0)
    conditions = set_condition(
        conditions, type_="Hydrated", status=True, reason="H", message="", now=0
    )
    conditions = set_condition(
        conditions, type_="Ready", status=False, reason="R", message="", now=0
    )
    assert [c.type for c in conditions] == ["Hydrated", "Ready"]
