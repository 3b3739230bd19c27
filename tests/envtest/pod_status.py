"""A pod's ``status`` as the kubelet reports it, from what runs here."""

from __future__ import annotations

from typing import Any

from tests.envtest.pod_run import PodRun, now_rfc3339

__all__ = ["running_status", "waiting_status"]


def _condition(type_: str, status: bool, since: str) -> dict[str, Any]:
    return {"type": type_, "status": "True" if status else "False", "lastTransitionTime": since}


def running_status(run: PodRun, host_ip: str, started: str) -> dict[str, Any]:
    """Phase, addresses, conditions and one status per container."""
    finished = run.finished()
    codes = [c.exit_code for c in run.containers]
    phase = "Running"
    if finished:
        phase = "Succeeded" if all(code == 0 for code in codes) else "Failed"
    ready = not finished and all(c.ready and c.exit_code is None for c in run.containers)
    now = now_rfc3339()
    return {
        "phase": phase,
        "hostIP": host_ip,
        "podIP": run.network.address,
        "podIPs": [{"ip": run.network.address}],
        "startTime": started,
        "conditions": [
            _condition("PodScheduled", True, started),
            _condition("Initialized", True, started),
            _condition("ContainersReady", ready, now),
            _condition("Ready", ready, now),
        ],
        "containerStatuses": [
            {
                "name": c.name,
                "image": c.image,
                "imageID": c.image,
                "containerID": f"envtest://{c.process.pid}",
                "ready": c.ready and c.exit_code is None,
                "started": c.exit_code is None,
                "restartCount": 0,
                "state": c.state(),
            }
            for c in run.containers
        ],
    }


def waiting_status(pod: dict[str, Any], reason: str, message: str) -> dict[str, Any]:
    """A pod whose containers cannot start yet (``ContainerCreating``, ``ErrImagePull``)."""
    return {
        "phase": "Pending",
        "containerStatuses": [
            {
                "name": c["name"],
                "image": c.get("image", ""),
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "state": {"waiting": {"reason": reason, "message": message}},
            }
            for c in pod["spec"]["containers"]
        ],
    }
