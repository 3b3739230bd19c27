"""A dataflow's build is retried when it fails for a reason other than its query."""

from __future__ import annotations

from typing import cast

import pytest
import structlog

from dataflow_operator.core.errors import InvalidSpec
from dataflow_operator.runtime.engine import install
from dataflow_operator.runtime.engine.install import build_with_retries
from dataflow_operator.runtime.engine.running import RETRIES
from dataflow_operator.runtime.strategies.build import BuiltDataflow

BUILT = cast(BuiltDataflow, object())


class _Flaky:
    """Fails with ``error`` ``failures`` times, then returns :data:`BUILT`."""

    def __init__(self, error: Exception, failures: int) -> None:
        self.error, self.failures, self.calls = error, failures, 0

    def __call__(self) -> BuiltDataflow:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return BUILT


@pytest.fixture(autouse=True)
def _no_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(install, "RETRY_PAUSE", 0.0)


def test_a_build_that_failed_for_another_reason_is_retried() -> None:
    flaky = _Flaky(RuntimeError("worker did not start"), failures=RETRIES)
    with structlog.testing.capture_logs() as logs:
        assert build_with_retries("d", flaky) is BUILT
    assert flaky.calls == RETRIES + 1
    assert [(e["event"], e["error"]) for e in logs] == [
        ("dataflow not built; retrying", "worker did not start")
    ] * RETRIES


def test_a_build_that_keeps_failing_raises_its_last_error() -> None:
    flaky = _Flaky(RuntimeError("worker did not start"), failures=RETRIES + 1)
    with pytest.raises(RuntimeError, match="worker did not start"):
        build_with_retries("d", flaky)
    assert flaky.calls == RETRIES + 1


@pytest.mark.parametrize("error", [InvalidSpec("bad sql"), ValueError("bad value")])
def test_the_querys_own_error_is_not_retried(error: Exception) -> None:
    flaky = _Flaky(error, failures=1)
    with pytest.raises(type(error)):
        build_with_retries("d", flaky)
    assert flaky.calls == 1
