"""A Replica's state location in its status: ``status.stateClaim`` and ``PersistentState``.

With ``spec.storage`` every attempt mounts the Replica's one state claim, which the
operator creates (idempotently) before any driver pod. An existing claim is never
changed: a ``spec.storage`` that no longer matches it (another size, class or access
modes) keeps the claim as it is and says so in ``PersistentState=False``
(``StorageChangeRejected``) and a Warning Event. With ``spec.stateUri`` the state lives on
that object store / HDFS location: ``PersistentState=True`` (``StateUri``). With neither
the state is an emptyDir, lost on every restart: ``PersistentState=False``
(``EphemeralState``). Each message says where the state lives.
"""

from __future__ import annotations

from dataflow_operator.api.replica import Replica
from dataflow_operator.controller.manifests import LOCAL_STATE_URI, quantity_bytes
from dataflow_operator.controller.naming import state_claim_name
from dataflow_operator.controller.replica.view import PERSISTENT_STATE, DecisionBuilder
from dataflow_operator.controller.shared.observation import ClaimObservation

__all__ = ["storage_condition", "storage_conflicts"]


def storage_conflicts(replica: Replica, claim: ClaimObservation) -> list[str]:
    """How ``spec.storage`` differs from the existing claim (empty: it matches).

    A class left to the cluster's default matches whatever class the claim got.
    """
    storage = replica.spec.storage
    if storage is None:
        return []
    problems = []
    if claim.size is None or quantity_bytes(claim.size) != quantity_bytes(storage.size):
        problems.append(f"size {storage.size} (the claim has {claim.size})")
    wanted_class = storage.storage_class_name
    if wanted_class is not None and wanted_class != claim.storage_class_name:
        problems.append(
            f"storageClassName {wanted_class} (the claim has {claim.storage_class_name})"
        )
    if sorted(storage.access_modes) != sorted(claim.access_modes):
        problems.append(
            f"accessModes {list(storage.access_modes)} (the claim has {list(claim.access_modes)})"
        )
    return problems


def storage_condition(b: DecisionBuilder) -> None:
    """``status.stateClaim`` and the ``PersistentState`` condition; see the module docstring."""
    replica, claim = b.view.replica, b.view.claim
    if replica.spec.state_uri is not None:
        b.set(state_claim=None)
        b.condition(
            PERSISTENT_STATE,
            True,
            "StateUri",
            f"state at {replica.spec.state_uri}, reached by the driver and every executor; "
            "it survives restarts and is not deleted with the Replica",
        )
        return
    if replica.spec.storage is None:
        b.set(state_claim=None)
        b.condition(
            PERSISTENT_STATE,
            False,
            "EphemeralState",
            f"no spec.storage nor spec.stateUri: the state ({LOCAL_STATE_URI}) is an emptyDir "
            "in the driver pod, lost on every restart",
        )
        return
    name = state_claim_name(replica.metadata.name)
    b.set(state_claim=name)
    problems = storage_conflicts(replica, claim) if claim is not None else []
    if not problems:
        b.condition(
            PERSISTENT_STATE,
            True,
            "StateClaim",
            f"state ({LOCAL_STATE_URI}) in PersistentVolumeClaim {name}, mounted on the driver "
            "and every executor; it survives restarts",
        )
        return
    message = (
        f"spec.storage asks for {'; '.join(problems)}: the existing claim {name} is kept "
        "unchanged (delete the Replica to recreate it; expand a claim in place with "
        "kubectl where its class allows, then set the same size here)"
    )
    was = next((c for c in b.conditions if c.type == PERSISTENT_STATE), None)
    if was is None or was.message != message:
        b.event("Warning", "StorageChangeRejected", message)
    b.condition(PERSISTENT_STATE, False, "StorageChangeRejected", message)
