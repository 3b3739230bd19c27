"""The executors of a Replica's current attempt, in its status: how many run, which failed.

Spark creates and replaces the executors; the operator only reports them. Each decision
counts the executor pods owned by the current driver pod (``status.executorsRunning``
of ``status.executorsDesired``, and ``status.executors`` at a glance), counts each
failed one once (``status.executorFailures``; a pod is new when it ended after
``status.lastExecutorFailure``), records the newest as ``lastExecutorFailure`` with a
Warning Event ``ExecutorFailed``, and keeps condition ``ExecutorsFailing`` True for
:data:`FAILING_WINDOW_MS` after a failure, so that an executor crash-looping behind a
driver that still runs is visible. A new attempt starts its counts afresh.
"""

from __future__ import annotations

from dataflow_operator.api.replica import ExecutorFailure
from dataflow_operator.api.replica_rules import shared_state
from dataflow_operator.controller.replica.observation import ExecutorObservation
from dataflow_operator.controller.replica.view import EXECUTORS_FAILING, DecisionBuilder
from dataflow_operator.core.time import format_timestamp

__all__ = ["FAILING_WINDOW_MS", "MAX_MESSAGE", "executor_status", "telling_line"]

FAILING_WINDOW_MS = 5 * 60_000
"""How long after an executor failure ``ExecutorsFailing`` stays True."""
MAX_MESSAGE = 256
_STACK_PREFIXES = ("at ", "...", "Caused by: ", "Suppressed: ")


def telling_line(message: str) -> str:
    """The line of a termination message (a log's tail) that says what went wrong: the
    last ``Caused by:`` cause, else the last line that is not a stack frame, cut to
    :data:`MAX_MESSAGE` characters."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    causes = [line.removeprefix("Caused by: ") for line in lines if line.startswith("Caused by: ")]
    if causes:
        return causes[-1][:MAX_MESSAGE]
    plain = [line for line in lines if not line.startswith(_STACK_PREFIXES)]
    return (plain[-1] if plain else "")[:MAX_MESSAGE]


def _describe(failure: ExecutorFailure) -> str:
    reason = f" ({failure.reason})" if failure.reason else ""
    detail = f": {failure.message}" if failure.message else ""
    return f"executor {failure.pod} exited with code {failure.exit_code}{reason}{detail}"


def _new_failures(
    pods: list[ExecutorObservation], last: ExecutorFailure | None, now: int
) -> list[tuple[int, ExecutorObservation]]:
    """Failed pods not counted yet, oldest first, each with when it ended."""
    found = []
    for pod in pods:
        if not pod.failed:
            continue
        at = pod.finished_at if pod.finished_at is not None else now
        if last is not None and (at < last.at_ms or (at == last.at_ms and pod.name == last.pod)):
            continue
        if last is not None and pod.finished_at is None and pod.name == last.pod:
            continue
        found.append((at, pod))
    return sorted(found, key=lambda item: (item[0], item[1].name))


def executor_status(b: DecisionBuilder) -> None:
    """Set the executor counts, the last failure and ``ExecutorsFailing``."""
    view, old = b.view, b.old
    spec = view.replica.spec
    desired = spec.executor.instances
    attempt = int(b.values.get("attempt") or 0)
    if desired == 0:
        why = "in the driver" if shared_state(spec) else "no shared storage"
        b.set(executors=f"0 ({why})", executors_desired=0, executors_running=0)
        b.set(executor_failures=0, last_executor_failure=None)
        b.condition(EXECUTORS_FAILING, False, "NoExecutors", f"Spark runs in the driver ({why})")
        return
    last = old.last_executor_failure
    failures = old.executor_failures
    if last is None or last.attempt != attempt:
        last, failures = None, 0
    driver = b.values.get("driver_pod")
    pods = [p for p in view.executors if p.driver == driver and driver]
    running = sum(1 for p in pods if p.running and not p.deleting)
    fresh = _new_failures(pods, last, view.now)
    for at, pod in fresh:
        last = ExecutorFailure(
            pod=pod.name,
            attempt=max(1, attempt),
            exit_code=pod.exit_code,
            reason=(pod.reason or "Error")[:128],
            message=telling_line(pod.message),
            at=format_timestamp(at),
            at_ms=at,
        )
        failures += 1
    if fresh and last is not None:
        more = f" ({len(fresh) - 1} more since the last look)" if len(fresh) > 1 else ""
        b.event("Warning", "ExecutorFailed", _describe(last) + more)
    b.set(
        executors=f"{running}/{desired} running",
        executors_desired=desired,
        executors_running=running,
        executor_failures=failures,
        last_executor_failure=last.model_dump() if last is not None else None,
    )
    age = view.now - last.at_ms if last is not None else None
    if last is not None and age is not None and age < FAILING_WINDOW_MS:
        message = f"{_describe(last)}; {failures} failed in attempt {attempt}"
        b.condition(EXECUTORS_FAILING, True, last.reason, message)
        b.decision.wake_at(FAILING_WINDOW_MS - age)
    else:
        b.condition(EXECUTORS_FAILING, False, "ExecutorsRunning", f"{running}/{desired} running")
