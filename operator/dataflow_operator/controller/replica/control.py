"""The operator's side of the replicas' control API: one link per driver attempt.

The serving attempt's link keeps the replica's desired set installed
(``PUT /dataflows``) and pulls ``GET /status``; its reports reach the Dataflows' status.
A make-before-break successor gets its own link, polled the same way but reported
nowhere until the cutover promotes it.
"""

from __future__ import annotations

from collections.abc import Iterable

from dataflow_operator.api.protocol import (
    DataflowReport,
    DesiredDataflows,
    ReplicaPhase,
    ReplicaReport,
)
from dataflow_operator.api.replica import AttemptPhase, Replica, ReplicaStatus
from dataflow_operator.controller.control_client import ControlError
from dataflow_operator.controller.manifests import control_address
from dataflow_operator.controller.replica.logic import ControlObservation
from dataflow_operator.controller.replica.resources import control_token
from dataflow_operator.controller.shared.observation import PodObservation, PodPhase
from dataflow_operator.controller.shared.registry import AttemptLink, ReplicaRuntime
from dataflow_operator.controller.shared.release_meet import release_meet
from dataflow_operator.controller.shared.state import OperatorState, now_ms
from dataflow_operator.controller.shared.views import ClusterView
from dataflow_operator.logs import get_logger

__all__ = ["forget_control", "observation", "poll_attempts", "promote"]


async def poll_attempts(
    state: OperatorState,
    rt: ReplicaRuntime,
    replica: Replica,
    cluster: ClusterView,
    pods: list[PodObservation],
) -> int | None:
    """Sync and poll the serving driver, and a successor that runs; ms until next time.

    ``pods``: the serving and successor pods as observed before the decision (a cutover
    may have swapped their roles since).
    """
    status = replica.status or ReplicaStatus()
    namespace = replica.metadata.namespace or "default"
    by_name = {p.name: p for p in pods}
    delay: int | None = None
    driver = by_name.get(status.driver_pod or "")
    if status.phase is AttemptPhase.RUNNING and driver is not None:
        rt.serving = rt.serving or AttemptLink(driver.name)
        delay = await _sync(
            state,
            rt,
            rt.serving,
            replica=replica,
            attempt=status.attempt,
            pod=driver,
            cluster=cluster,
        )
    elif rt.serving is not None:
        forget_control(state, rt, namespace)
    handover = status.handover
    successor = by_name.get(handover.driver_pod) if handover is not None else None
    if handover is not None and successor is not None and successor.phase is PodPhase.RUNNING:
        rt.successor = rt.successor or AttemptLink(successor.name)
        poll = await _sync(
            state,
            rt,
            rt.successor,
            replica=replica,
            attempt=handover.attempt,
            pod=successor,
            cluster=cluster,
        )
        delay = poll if delay is None else min(delay, poll)
    return delay


def observation(link: AttemptLink | None, desired: DesiredDataflows) -> ControlObservation | None:
    """What the last poll of one attempt says, for the decision."""
    if link is None:
        return None
    done = _hydrated(link, desired)
    return ControlObservation(
        link.ready,
        link.report,
        link.error,
        hydrated=len(done) == len(desired.dataflows),
        hydrated_dataflows=len(done),
        dataflows=len(desired.dataflows),
    )


def _hydrated(link: AttemptLink, desired: DesiredDataflows) -> list[str]:
    """The desired dataflows installed at their generation and hydrated on the attempt."""
    report = link.report
    if not link.ready or report is None or report.phase is not ReplicaPhase.RUNNING:
        return []
    if link.applied is None:
        return []  # the desired set was never accepted: the report is not about it
    reported = {d.name: d for d in report.dataflows if not d.dropping}
    done = []
    for wanted in desired.dataflows:
        seen = reported.get(wanted.name)
        if seen is None or not seen.hydrated:
            continue
        if wanted.generation is not None and seen.generation not in (None, wanted.generation):
            continue
        done.append(wanted.name)
    return done


def promote(state: OperatorState, rt: ReplicaRuntime, namespace: str) -> None:
    """After a cutover: the successor's control link serves, its reports reach the Dataflows."""
    link = rt.successor
    assert link is not None
    forget_control(state, rt, namespace)
    rt.serving, rt.successor = link, None
    if rt.cluster is not None and link.report is not None:
        state.mark_dirty(namespace, rt.cluster, [d.name for d in link.report.dataflows])


def forget_control(state: OperatorState, rt: ReplicaRuntime, namespace: str) -> None:
    """The serving driver changed or stopped: its reports no longer describe the replica."""
    had = rt.report
    rt.serving = None
    if had is not None and rt.cluster is not None:
        state.mark_dirty(namespace, rt.cluster, [d.name for d in had.dataflows])


async def _sync(
    state: OperatorState,
    rt: ReplicaRuntime,
    link: AttemptLink,
    *,
    replica: Replica,
    attempt: int,
    pod: PodObservation,
    cluster: ClusterView,
) -> int:
    """Install the desired set on one attempt if it changed, pull its status; ms until the
    next poll. Only the serving attempt's reports reach the Dataflows' status."""
    config, now = state.config, now_ms()
    namespace = replica.metadata.namespace or "default"
    serving = link is rt.serving
    if link.applied == cluster.digest and now < link.next_poll_at:
        return link.next_poll_at - now
    address = control_address(replica, config.control_port, attempt, pod.ip)
    log = get_logger("dataflow_operator.replica").bind(
        namespace=namespace, name=replica.metadata.name, pod=link.pod
    )
    was_ready = link.ready
    token = await control_token(state.kube, rt, replica)
    try:
        if link.applied != cluster.digest:
            result = await state.control.put_dataflows(address, cluster.desired, token)
            link.applied, link.applied_at = cluster.digest, now_ms()
            if result.failed:
                for dataflow, why in sorted(result.failed.items()):
                    log.warning("dataflow failed to install", dataflow=dataflow, error=why)
            if link.ready and now < link.next_poll_at:
                # The next poll shows what was installed: while Dataflows are created by
                # the thousand, a poll after every install would parse a report per change.
                return link.next_poll_at - now
        report = await state.control.status(address, token)
    except ControlError as error:
        if error.status == 401:
            rt.token = None  # read the Secret again: it may have been replaced
        state.metrics.control_errors.labels(error.reason).inc()
        link.ready, link.error = False, error.message
        link.next_poll_at = now_ms() + config.status_poll_interval.millis
        if was_ready and serving:
            _mark_report(state, rt, namespace, link, None)
            return 0
        return config.status_poll_interval.millis
    link.ready, link.error = True, None
    if serving:
        _mark_report(state, rt, namespace, link, report)
    else:
        link.report, link.report_at = report, now_ms()
    await _send_release(
        state, link, rt=rt, address=address, token=token, cluster=cluster, namespace=namespace
    )
    installed = {d.name for d in report.dataflows if not d.dropping}  # dropping: on its way out
    if installed != {d.name for d in cluster.desired.dataflows}:
        link.applied = None  # the replica lost or kept something: send the full set again
    link.next_poll_at = now_ms() + config.status_poll_interval.millis
    return 0 if not was_ready else config.status_poll_interval.millis


async def _send_release(
    state: OperatorState,
    link: AttemptLink,
    *,
    rt: ReplicaRuntime,
    address: str,
    token: str | None,
    cluster: ClusterView,
    namespace: str,
) -> None:
    """Send the attempt the cluster's release meet when it changed (design 3).

    A failure is retried at the next poll; it never makes the replica unready.
    """
    if rt.cluster is None:
        return
    replicas = [
        (name, [a.report for a in (other.serving, other.successor) if a is not None] or [None])
        for name, other in state.replicas.of_cluster(namespace, rt.cluster)
    ]
    meet = release_meet(replicas, cluster.desired)
    wire = meet.frontiers.model_dump_json()
    if wire == link.released:
        return
    try:
        await state.control.put_release(address, meet.frontiers, token)
    except ControlError as error:
        get_logger("dataflow_operator.replica").debug(
            "release frontiers not sent", pod=link.pod, error=error.message
        )
        return
    link.released = wire


def _names(report: ReplicaReport | None) -> Iterable[str]:
    return [d.name for d in report.dataflows] if report is not None else []


def _mark_report(
    state: OperatorState,
    rt: ReplicaRuntime,
    namespace: str,
    link: AttemptLink,
    report: ReplicaReport | None,
) -> None:
    """Keep the serving attempt's new report; mark the dataflows whose view changed."""
    old = link.report
    link.report, link.report_at = report, now_ms()
    if rt.cluster is None:
        return
    before = {d.name: d for d in old.dataflows} if old is not None else {}
    after = {d.name: d for d in report.dataflows} if report is not None else {}
    changed = [n for n in set(before) | set(after) if before.get(n) != after.get(n)]
    if old is None or report is None:
        changed = list(set(_names(old)) | set(_names(report)))
    progress = [n for n in changed if _only_progress(before.get(n), after.get(n))]
    if progress:
        state.mark_dirty(namespace, rt.cluster, progress, progress=True)
    if len(progress) < len(changed):
        state.mark_dirty(namespace, rt.cluster, set(changed) - set(progress))


def _only_progress(before: DataflowReport | None, after: DataflowReport | None) -> bool:
    """Only the frontier moved: the report says nothing else new about the dataflow."""
    if before is None or after is None:
        return False
    return before.model_copy(update={"frontier": after.frontier}) == after
