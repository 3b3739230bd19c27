"""The replica's state location and the volume behind it: the claim, or an emptyDir.

With ``spec.stateUri`` the location is that URI and no volume is mounted. Otherwise it is
``file:///opt/dataflow/state``, the ``state`` volume: the Replica's PersistentVolumeClaim
with ``spec.storage`` (shared by every attempt and mounted on every executor), else an
emptyDir that dies with the pod.
"""

from __future__ import annotations

from typing import Any

from dataflow_operator.api.replica import Replica
from dataflow_operator.controller.manifests.common import namespace_of, owner_reference
from dataflow_operator.controller.naming import (
    LABEL_ROLE,
    ROLE_STATE,
    standard_labels,
    state_claim_name,
)

__all__ = [
    "LOCAL_STATE_URI",
    "STATE_DIR",
    "STATE_VOLUME",
    "build_state_claim",
    "pod_security_context",
    "state_mounts",
    "state_uri",
    "state_volumes",
]

STATE_DIR = "/opt/dataflow/state"
"""Where the ``state`` volume is mounted, on the driver and on every executor."""
LOCAL_STATE_URI = f"file://{STATE_DIR}"
"""The state location when it is the ``state`` volume (a claim or an emptyDir)."""
STATE_VOLUME = "state"
IMAGE_GID = 185
"""The group of the image's user: owner of a claim's files (``fsGroup``)."""


def state_uri(replica: Replica) -> str:
    """The replica's one state location: ``spec.stateUri``, else the ``state`` volume."""
    return replica.spec.state_uri or LOCAL_STATE_URI


def state_mounts(replica: Replica) -> list[dict[str, Any]]:
    """The ``state`` volume's mount (none with ``stateUri``) and the extra mounts."""
    state = [] if replica.spec.state_uri else [{"name": STATE_VOLUME, "mountPath": STATE_DIR}]
    return [*state, *replica.spec.volume_mounts]


def state_volumes(replica: Replica) -> list[dict[str, Any]]:
    """The ``state`` volume (none with ``stateUri``) and the extra volumes."""
    state = [] if replica.spec.state_uri else [_state_volume(replica)]
    return [*state, *replica.spec.volumes]


def pod_security_context(replica: Replica) -> dict[str, Any] | None:
    """With a claim: its files belong to the image's group, whatever user the image runs as."""
    if replica.spec.storage is None:
        return None
    return {"fsGroup": IMAGE_GID, "fsGroupChangePolicy": "OnRootMismatch"}


def _state_volume(replica: Replica) -> dict[str, Any]:
    """The ``state`` volume: the Replica's claim with ``spec.storage``, else an emptyDir."""
    if replica.spec.storage is None:
        return {"name": STATE_VOLUME, "emptyDir": {}}
    claim = state_claim_name(replica.metadata.name)
    return {"name": STATE_VOLUME, "persistentVolumeClaim": {"claimName": claim}}


def build_state_claim(replica: Replica) -> dict[str, Any] | None:
    """The PersistentVolumeClaim of the replica's state; ``None`` without ``spec.storage``.

    One per Replica, deterministic name, owned by the Replica (deleted with it, never
    with a driver pod), so every attempt mounts the same checkpoints.
    """
    storage = replica.spec.storage
    if storage is None:
        return None
    labels = {
        **standard_labels(replica.metadata.name, replica.spec.cluster),
        LABEL_ROLE: ROLE_STATE,
    }
    spec: dict[str, Any] = {
        "accessModes": list(storage.access_modes),
        "resources": {"requests": {"storage": storage.size}},
        "volumeMode": "Filesystem",
    }
    if storage.storage_class_name is not None:
        spec["storageClassName"] = storage.storage_class_name
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": state_claim_name(replica.metadata.name),
            "namespace": namespace_of(replica),
            "labels": labels,
            "ownerReferences": [owner_reference(replica)],
        },
        "spec": spec,
    }
