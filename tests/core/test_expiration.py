"""The expiration rules, one named test each, and the whole function as a property."""

from hypothesis import given
from hypothesis import strategies as st

from dataflow_operator.core.durations import Duration
from dataflow_operator.core.expiration import (
    DataflowKind,
    ExpirationInputs,
    dataflow_expiration,
    dataflow_until,
    replica_expiration,
)
from dataflow_operator.core.refresh import RefreshSchedule
from dataflow_operator.core.time import Frontier
from dataflow_operator.core.timelines import Timeline, TimelineKind

DAY = 86_400_000
START = 1_700_000_000_000
EPOCH = Timeline.epoch_milliseconds()


def inputs(upper: Frontier = Frontier.at(START), **kwargs: object) -> ExpirationInputs:
    defaults: dict[str, object] = {"kind": DataflowKind.SUBSCRIBE, "timeline": EPOCH}
    defaults.update(kwargs)
    return ExpirationInputs(inputs_upper=upper, **defaults)  # type: ignore[arg-type]


def test_replica_expiration_is_start_plus_offset() -> None:
    assert replica_expiration(START, Duration(21 * DAY)) == START + 21 * DAY


def test_unset_offset_means_no_expiration() -> None:
    assert replica_expiration(START, None) is None
    assert dataflow_expiration(None, inputs()) is None


def test_zero_offset_disables_expiration() -> None:
    assert replica_expiration(START, Duration(0)) is None


def test_one_off_queries_never_expire() -> None:
    assert dataflow_expiration(START + DAY, inputs(kind=DataflowKind.ONE_OFF)) is None


def test_every_long_running_kind_expires() -> None:
    for kind in (DataflowKind.MATERIALIZED_VIEW, DataflowKind.INDEX, DataflowKind.SUBSCRIBE):
        assert dataflow_expiration(START + DAY, inputs(kind=kind)) == START + DAY


def test_other_timelines_do_not_expire() -> None:
    erp = Timeline(TimelineKind.EXTERNAL, "erp")
    assert dataflow_expiration(START + DAY, inputs(timeline=erp)) is None


def test_constant_dataflows_do_not_expire() -> None:
    assert dataflow_expiration(START + DAY, inputs(timeline=None)) is None


def test_empty_inputs_upper_means_no_expiration() -> None:
    assert dataflow_expiration(START + DAY, inputs(upper=Frontier.empty())) is None


def test_refresh_schedule_rounds_up_to_the_next_refresh() -> None:
    daily = RefreshSchedule(every=Duration(DAY), aligned_to=0)
    expiration = START + DAY  # not on a day boundary
    got = dataflow_expiration(expiration, inputs(refresh_schedules=(daily,)))
    assert got is not None and got % DAY == 0 and expiration <= got < expiration + DAY


def test_refresh_on_the_expiration_itself_is_kept() -> None:
    at_expiration = RefreshSchedule(at=(START + DAY,))
    assert (
        dataflow_expiration(START + DAY, inputs(refresh_schedules=(at_expiration,))) == START + DAY
    )


def test_schedule_without_a_later_refresh_means_no_expiration() -> None:
    past_only = RefreshSchedule(at=(START - DAY,))
    assert dataflow_expiration(START + DAY, inputs(refresh_schedules=(past_only,))) is None


def test_inputs_upper_beyond_the_replica_expiration_wins() -> None:
    ahead = Frontier.at(START + 40 * DAY)
    assert dataflow_expiration(START + DAY, inputs(upper=ahead)) == START + 40 * DAY


def test_otherwise_the_replica_expiration() -> None:
    assert dataflow_expiration(START + DAY, inputs(upper=Frontier.at(START))) == START + DAY


def test_until_is_met_with_the_expiration() -> None:
    assert dataflow_until(Frontier.empty(), START) == Frontier.at(START)
    assert dataflow_until(Frontier.at(START - 1), START) == Frontier.at(START - 1)
    assert dataflow_until(Frontier.at(7), None) == Frontier.at(7)


timelines = st.sampled_from(
    [EPOCH, None, Timeline(TimelineKind.USER, "u"), Timeline(TimelineKind.COUNTER, "c")]
)
schedules = st.builds(
    RefreshSchedule,
    every=st.one_of(st.none(), st.integers(1, 40 * DAY).map(Duration)),
    aligned_to=st.integers(0, START),
    at=st.lists(st.integers(0, START + 100 * DAY), max_size=3).map(tuple),
)


@given(
    start=st.integers(0, START),
    offset=st.one_of(st.none(), st.integers(0, 60 * DAY).map(Duration)),
    kind=st.sampled_from(list(DataflowKind)),
    timeline=timelines,
    upper=st.one_of(st.just(Frontier.empty()), st.integers(0, START + 90 * DAY).map(Frontier.at)),
    refresh=st.lists(schedules, max_size=2).map(tuple),
)
def test_expiration_properties(
    start: int,
    offset: Duration | None,
    kind: DataflowKind,
    timeline: Timeline | None,
    upper: Frontier,
    refresh: tuple[RefreshSchedule, ...],
) -> None:
    replica = replica_expiration(start, offset)
    got = dataflow_expiration(replica, ExpirationInputs(kind, timeline, upper, refresh))
    if timeline is None or not timeline.is_epoch_milliseconds:
        assert got is None
    if got is not None:
        assert replica is not None
        assert got >= replica
        assert upper.lower is not None and got >= upper.lower
    if (
        replica is not None
        and kind.is_long_running
        and timeline == EPOCH
        and not upper.is_empty
        and not refresh
    ):
        assert got == max(replica, upper.lower or 0)
