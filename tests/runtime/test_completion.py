"""How a stateful dataflow's batches complete its output (:mod:`...engine.completion`)."""

from __future__ import annotations

from dataflow_operator.runtime.engine.completion import BatchCompletion, Completion


def test_a_new_querys_first_batch_is_complete_below_its_inputs_frontier() -> None:
    # Even a temporal filter's: nothing is held from before it.
    completion = Completion(releases_at_frontier=False)
    assert completion.of_batch(0, [10, 10], watermark=0) == BatchCompletion(10, 10, told=True)


def test_a_temporal_filters_later_batches_go_by_the_watermark() -> None:
    completion = Completion(releases_at_frontier=False)
    completion.of_batch(0, [10, 10], watermark=0)
    assert completion.of_batch(1, [20, 20], watermark=9) == BatchCompletion(20, 10, told=False)


def test_a_join_in_step_is_complete_below_the_frontier_every_batch() -> None:
    completion = Completion(releases_at_frontier=True)
    completion.of_batch(0, [10, 10], watermark=0)
    assert completion.of_batch(1, [20, 20], watermark=9) == BatchCompletion(20, 20, told=True)
    assert completion.of_batch(2, [30, 30], watermark=19) == BatchCompletion(30, 30, told=True)


def test_an_input_ahead_makes_batches_go_by_the_watermark_until_it_passes() -> None:
    completion = Completion(releases_at_frontier=True)
    completion.of_batch(0, [10, 10], watermark=0)
    # One source is ahead (its rows at 20..24 are held past the frontier 20).
    assert completion.of_batch(1, [20, 25], watermark=9) == BatchCompletion(20, 10, told=False)
    # In step again, but what batch 1 held is below 25: the watermark (19) has not passed it.
    assert completion.of_batch(2, [30, 30], watermark=19) == BatchCompletion(30, 20, told=False)
    # The watermark passed 25: the held rows fire now, the batch is complete below 40.
    assert completion.of_batch(3, [40, 40], watermark=29) == BatchCompletion(40, 40, told=True)


def test_a_restarted_query_goes_by_the_watermark_until_it_knows_what_is_held() -> None:
    completion = Completion(releases_at_frontier=True)  # a restart: batch 7 is its first
    assert completion.of_batch(7, [70, 70], watermark=59) == BatchCompletion(70, 60, told=False)
    assert completion.of_batch(8, [80, 80], watermark=69) == BatchCompletion(80, 80, told=True)
