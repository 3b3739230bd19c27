"""The single writer of Dataflow status.

Replica daemons, Dataflow handlers and replica deletions only *mark* dataflows dirty;
this task recomputes each dirty Dataflow's status from its validity and every replica's
latest report, and writes a merge patch of what changed — one writer per object, so
that concurrent replicas never overwrite each other's entries in ``status.replicas``.
Patches hold only what changed, a Dataflow marked dirty again while it waits is written
once, the marked ones are taken in rounds, changes before progress (see
:mod:`.status_queue`), the writes to the API server are rate-limited
(``DATAFLOW_STATUS_QPS``), progress-only writes use only the rate that changes leave
spare (half a second's worth is kept for changes), and they are shed first while the
operator is busy (see :mod:`.progress_budget`). What a written status announces
(hydration flips, a recompute and why) is posted as Events here, where it is decided.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from dataflow_operator.api.dataflow import DataflowStatus
from dataflow_operator.controller.dataflow.progress_budget import ProgressBudget, watch_loop_lag
from dataflow_operator.controller.events import post_event
from dataflow_operator.controller.kube import ApiError, KubeApi
from dataflow_operator.controller.rate_limit import TokenBucket
from dataflow_operator.controller.shared.dataflow_logic import (
    ReplicaSeen,
    dataflow_status,
    status_events,
    status_patch,
)
from dataflow_operator.controller.shared.state import OperatorState, now_ms
from dataflow_operator.controller.shared.status_queue import DataflowKey
from dataflow_operator.logs import get_logger

__all__ = ["run_status_writer"]

CONCURRENCY = 32
ROUND = 8 * CONCURRENCY
"""Dataflows taken from the queue at a time (see :meth:`StatusQueue.take`)."""
PROGRESS_RETRY_S = 0.05
"""With progress waiting and none allowed, how long until the writer looks again."""
_log = get_logger("dataflow_operator.status")
Written = tuple[Mapping[str, Any], DataflowStatus]
"""A Dataflow's status as last written: on the wire, and parsed."""


async def run_status_writer(state: OperatorState) -> None:
    """Write dirty Dataflows' status until cancelled."""
    written: dict[tuple[str, str], Written] = {}
    semaphore = asyncio.Semaphore(CONCURRENCY)
    limiter = TokenBucket(state.config.status_qps)
    progress = ProgressBudget(state.config.status_qps, asyncio.get_running_loop().time)
    metrics = state.metrics

    def on_lag(lag_s: float) -> None:
        was_full = progress.rate >= progress.ceiling
        progress.observe_lag(lag_s)
        metrics.loop_lag_seconds.set(lag_s)
        metrics.status_progress_rate.set(progress.rate)
        if was_full != (progress.rate >= progress.ceiling):
            _log.info(
                "progress writes slowed" if was_full else "progress writes at full rate",
                loop_lag_seconds=round(lag_s, 3),
                rate=progress.rate,
            )

    async def one(key: DataflowKey, since: int) -> None:
        namespace, cluster, name = key
        async with semaphore:
            try:
                await _write(
                    state=state,
                    written=written,
                    namespace=namespace,
                    cluster=cluster,
                    name=name,
                    since=since,
                    limiter=limiter,
                )
            except (ApiError, OSError, TimeoutError) as error:
                _log.warning(
                    "status write failed", namespace=namespace, name=name, error=str(error)
                )
                state.statuses.retry(key, since)
            except Exception:  # one bad object must not stop every Dataflow's status
                _log.exception("status computation failed", namespace=namespace, name=name)

    lag = asyncio.create_task(watch_loop_lag(on_lag))
    try:
        while True:
            # Progress takes only what the API rate has spare beyond half a second's
            # worth, kept for changes, and what the loop's load leaves it.
            allowance = _least(progress.allowance(), limiter.spare(limiter.capacity / 2))
            batch = await state.statuses.take(
                ROUND,
                progress_limit=allowance,
                # with no progress allowed now, look again in a moment (or at a change)
                wait_s=max(PROGRESS_RETRY_S, progress.next_token_in() or 0)
                if allowance == 0
                else None,
            )
            progress.spend(sum(1 for marked in batch if marked.progress))
            await asyncio.gather(*(one(marked.key, marked.since) for marked in batch))
            if len(batch) < ROUND and state.statuses.pending:
                await asyncio.sleep(0.2)  # marked meanwhile, or failed: a moment to coalesce
    finally:
        lag.cancel()


async def _write(
    *,
    state: OperatorState,
    written: dict[tuple[str, str], Written],
    namespace: str,
    cluster: str,
    name: str,
    since: int,
    limiter: TokenBucket,
) -> None:
    # The cluster as the Dataflow handlers last acted on it: every Dataflow they mark
    # dirty is in it, and one lookup does not cost the cluster's size.
    view = state.views.acted.get((namespace, cluster))
    if view is None or name not in view.validity:
        _log.debug("status skipped: not indexed", namespace=namespace, name=name)
        written.pop((namespace, name), None)
        state.statuses.seen.pop((namespace, name), None)
        return
    validity = view.validity[name]
    known = written.get((namespace, name))
    if known is not None:
        previous, old = known
    else:  # the first write since the operator started: from the status on the watch
        previous = state.statuses.seen.get((namespace, name), {})
        try:
            old = DataflowStatus.model_validate(previous)
        except ValidationError:
            old = DataflowStatus()
    seen = [
        ReplicaSeen(replica, rt.ready, rt.reported(name))
        for replica, rt in state.replicas.of_cluster(namespace, cluster)
    ]
    generation = view.generations.get(name)
    parsed = view.dataflows.get(name)
    spec = parsed.spec if parsed is not None else None
    status = dataflow_status(generation, old, validity, seen, now_ms(), name=name, spec=spec)
    new = status.to_wire()
    patch = status_patch(previous, new)
    if patch:
        await limiter.acquire()
        await state.kube.merge_patch(
            KubeApi.custom(namespace, "dataflows", name, status=True), {"status": patch}
        )
        state.metrics.status_lag_seconds.observe(max(0, now_ms() - since) / 1000)
        _log.debug("status written", namespace=namespace, name=name, keys=sorted(patch))
        events = status_events(old, status) if parsed is not None else []
        if parsed is not None and events:  # most writes announce nothing: dump only then
            involved = parsed.model_dump(by_alias=True, include={"api_version", "kind", "metadata"})
            for reason, message in events:
                await limiter.acquire()
                try:
                    await post_event(
                        state.kube, involved, type="Normal", reason=reason, message=message
                    )
                except (ApiError, OSError, TimeoutError) as error:  # the status is written
                    _log.warning("event not posted", name=name, reason=reason, error=str(error))
    written[(namespace, name)] = (new, status)


def _least(a: int | None, b: int | None) -> int | None:
    """The smaller of two limits, ``None`` being none."""
    return b if a is None else a if b is None else min(a, b)
