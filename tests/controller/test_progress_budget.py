"""Progress-only status writes: a rate that halves while the loop is late and recovers."""

from __future__ import annotations

import asyncio
import time

import pytest

from dataflow_operator.controller.dataflow.progress_budget import (
    HIGH_LAG_S,
    LOW_LAG_S,
    ProgressBudget,
    watch_loop_lag,
)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_loop_that_keeps_time_gets_the_full_rate_in_bursts_of_one_second() -> None:
    clock = Clock()
    budget = ProgressBudget(500, clock)
    assert budget.allowance() == 500
    budget.spend(500)
    assert budget.allowance() == 0
    assert budget.next_token_in() == pytest.approx(1 / 500)
    clock.now = 0.1
    assert budget.allowance() == 50
    clock.now = 10
    assert budget.allowance() == 500  # never more than a second's worth


def test_a_loop_late_again_halves_the_rate_down_to_a_trickle_and_a_punctual_one_recovers() -> None:
    clock = Clock()
    budget = ProgressBudget(500, clock)
    budget.observe_lag(HIGH_LAG_S * 2)
    assert budget.rate == 500  # once late: a burst of work, not a busy loop
    budget.observe_lag(LOW_LAG_S)
    budget.observe_lag(HIGH_LAG_S * 2)
    assert budget.rate == 500
    budget.observe_lag(HIGH_LAG_S * 2)  # late again: busy
    assert budget.rate == 250
    for _ in range(20):
        budget.observe_lag(1.0)
    assert budget.rate == 5  # a hundredth: frontiers still move, slowly
    budget.spend(budget.allowance() or 0)
    clock.now = 1
    assert budget.allowance() == 5
    budget.observe_lag((HIGH_LAG_S + LOW_LAG_S) / 2)  # neither busy nor idle: held
    assert budget.rate == 5
    steps = 0
    while budget.rate < 500:
        budget.observe_lag(LOW_LAG_S / 2)
        steps += 1
    assert steps == 20 and budget.rate == 500


def test_no_rate_means_no_limit_and_no_shedding() -> None:
    budget = ProgressBudget(0, Clock())
    budget.observe_lag(5.0)
    assert budget.allowance() is None
    assert budget.next_token_in() is None


@pytest.mark.asyncio
async def test_the_watch_reports_how_late_a_blocked_loop_woke_it() -> None:
    lags: list[float] = []
    watch = asyncio.create_task(watch_loop_lag(lags.append, interval_s=0.02))
    await asyncio.sleep(0.1)
    time.sleep(0.3)  # the loop is blocked: the next sample is late by about that
    await asyncio.sleep(0.05)
    watch.cancel()
    assert max(lags) >= 0.2
    assert min(lags) < 0.05
