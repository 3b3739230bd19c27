"""Durations in the forms users write, and clear errors for everything else."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dataflow_operator.core.durations import MAX_DURATION, Duration, parse_duration
from dataflow_operator.core.errors import InvalidDuration

DAY = 86_400_000
HOUR = 3_600_000


@pytest.mark.parametrize(
    ("text", "millis"),
    [
        ("21d1h", 21 * DAY + HOUR),
        ("30 days", 30 * DAY),
        ("1h30m", HOUR + 30 * 60_000),
        ("500ms", 500),
        ("P21DT1H", 21 * DAY + HOUR),
        ("PT0.5S", 500),
        ("P1W", 7 * DAY),
        ("1 hour 30 minutes", HOUR + 30 * 60_000),
        ("1.5h", HOUR + 30 * 60_000),
        ("0", 0),
        (0, 0),
        ("  2w ", 14 * DAY),
    ],
)
def test_accepted_forms(text: str | int, millis: int) -> None:
    assert parse_duration(text).millis == millis


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("-1d", "negative"),
        ("garbage", "cannot parse"),
        ("5 fortnights", "unknown unit"),
        ("", "empty"),
        ("P1Y", "ISO-8601"),
        ("PT", "ISO-8601"),
        (30, "no unit"),
        (-5, "negative"),
        ("1d1d", "twice"),
        ("0.0001ms", "whole number"),
    ],
)
def test_rejected_with_a_reason(text: str | int, reason: str) -> None:
    with pytest.raises(InvalidDuration, match=reason):
        parse_duration(text)


@given(st.integers(0, MAX_DURATION))
def test_canonical_form_round_trips(millis: int) -> None:
    assert parse_duration(str(Duration(millis))).millis == millis


def test_canonical_form_is_compact() -> None:
    assert str(parse_duration("P21DT1H")) == "21d1h"
    assert str(Duration(0)) == "0"


def test_a_duration_longer_than_the_longest_accepted_is_one_clear_error() -> None:
    assert parse_duration("36500d").millis == MAX_DURATION
    for text in ("36501d", "99999999999999999999999d", "P99999999999999999999D"):
        with pytest.raises(InvalidDuration, match="is longer than 36500d"):
            parse_duration(text)
