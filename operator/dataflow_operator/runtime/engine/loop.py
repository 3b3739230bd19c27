"""The replica's clock loop: the engine stepped through a tick plan until it expires."""

from __future__ import annotations

import threading
from collections.abc import Callable

from dataflow_operator.api.injection import EXIT_EXPIRED, EXIT_FAILED, EXIT_OK
from dataflow_operator.core.time import Timestamp, format_timestamp
from dataflow_operator.logs import get_logger
from dataflow_operator.runtime.clock import TickPlan
from dataflow_operator.runtime.engine.engine import Engine

__all__ = ["run_plan"]

log = get_logger(__name__)


def run_plan(
    engine: Engine,
    plan: TickPlan,
    stop: threading.Event | None = None,
    after_batch: Callable[[Engine], None] | None = None,
) -> int:
    """Run batches at the plan's times; returns an exit code.

    Simulated steps are complete; on the wall clock a step is one Spark batch (see
    :meth:`Engine.step`), and a plan that ends completes its output at its last time.
    Stops with :data:`~dataflow_operator.api.injection.EXIT_EXPIRED` (and the
    expiration message in the log) before the first batch at or past the replica's
    expiration: the write frontier never passes it.
    """
    expiration = engine.config.expiration
    last: Timestamp | None = None
    for time in plan.times(wake=engine.next_due):
        if stop is not None and stop.is_set():
            last = None
            break
        if expiration is not None and time >= expiration:
            engine.expire(time)
            if after_batch is not None:
                after_batch(engine)
            return EXIT_EXPIRED
        engine.step(time, complete=plan.simulated)
        last = time
        held = engine.held_inputs() if expiration is not None else []
        if held:
            for dataflow, source, input_ in held:
                log.warning(
                    "input at or past the expiration held back; restarting instead",
                    dataflow=dataflow,
                    source=source,
                    file=input_.file,
                    time=format_timestamp(input_.time),
                    expiration=format_timestamp(input_.expiration),
                )
            engine.expire(time)
            if after_batch is not None:
                after_batch(engine)
            return EXIT_EXPIRED
        if after_batch is not None:
            after_batch(engine)
        if engine.all_failed():
            log.error("every dataflow failed; stopping")
            last = None
            break
    if last is not None and not plan.simulated:
        engine.step(last)  # the plan's end: the output complete up to its last time
        if after_batch is not None:
            after_batch(engine)
    engine.release_inputs(force=True)
    return EXIT_FAILED if engine.failures() else EXIT_OK
