"""Timelines: one per dataflow, constants fit any, mz_ names are reserved."""

import pytest

from dataflow_operator.core.errors import InvalidTimeline, MultipleTimelines
from dataflow_operator.core.timelines import (
    MULTIPLE_TIMELINES_MESSAGE,
    Timeline,
    TimelineKind,
    dataflow_timeline,
    validate_timeline_name,
)

EPOCH = Timeline.epoch_milliseconds()
ERP = Timeline(TimelineKind.EXTERNAL, "erp")


def test_single_timeline_is_the_dataflows() -> None:
    assert dataflow_timeline([("a", ERP), ("b", ERP)]) == ERP


def test_constants_fit_any_timeline() -> None:
    assert dataflow_timeline([("a", None), ("b", EPOCH)]) == EPOCH


def test_only_constants_have_no_timeline() -> None:
    assert dataflow_timeline([("a", None)]) is None
    assert dataflow_timeline([]) is None


def test_mixed_timelines_are_rejected_with_the_exact_message_and_detail() -> None:
    with pytest.raises(MultipleTimelines) as raised:
        dataflow_timeline([("events", EPOCH), ("orders", ERP), ("returns", ERP)])
    first, detail = str(raised.value).split("\n")
    assert first == MULTIPLE_TIMELINES_MESSAGE
    assert detail == "DETAIL: timelines: EpochMilliseconds (events); external:erp (orders, returns)"


def test_same_name_different_kind_is_a_different_timeline() -> None:
    with pytest.raises(MultipleTimelines):
        dataflow_timeline(
            [("a", Timeline(TimelineKind.USER, "x")), ("b", Timeline(TimelineKind.COUNTER, "x"))]
        )


def test_reserved_prefix() -> None:
    with pytest.raises(InvalidTimeline) as raised:
        validate_timeline_name("mz_foo")
    assert str(raised.value) == (
        'unacceptable timeline name "mz_foo"\nHINT: The prefix "mz_" is reserved for system timelines.'
    )
    assert validate_timeline_name("mzfoo") == "mzfoo"
