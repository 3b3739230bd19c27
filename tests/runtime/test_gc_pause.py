"""The cyclic collector paused for an operator's batch, and resumed as it was."""

from __future__ import annotations

import gc

import pytest

from dataflow_operator.runtime.strategies.gc_pause import cyclic_gc_paused


def test_the_collector_is_paused_inside_and_running_again_after_even_on_error() -> None:
    assert gc.isenabled()
    with cyclic_gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(ValueError), cyclic_gc_paused():
        raise ValueError("a failing batch")
    assert gc.isenabled()


def test_a_collector_paused_before_stays_paused() -> None:
    gc.disable()
    try:
        with cyclic_gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
