"""Rules across a Replica's fields: where its state lives, and who can reach it.

One place, pure: the Replica handler refuses a spec that breaks them (condition
``Degraded=True``/``InvalidSpec``, a Warning Event, no driver pod), and
``dataflow-operator check`` prints the same problems offline.

The state location is reached by the driver and by every executor, which Spark runs as
other pods (often on other nodes). So with ``executor.instances >= 1`` the state must be
an object store / HDFS (``stateUri``) or a claim every pod can mount (``ReadWriteMany``);
an emptyDir (neither given) or a ``ReadWriteOnce`` claim serves the driver alone.
Executors run only when asked for (``executor.instances`` defaults to 0, Spark inside the
driver), so the smallest manifest, ``spec: {cluster: default}``, runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from dataflow_operator.api.replica import ReplicaSpec

__all__ = [
    "MAX_POD_EXTRAS_BYTES",
    "RESERVED_VOLUMES",
    "SpecProblem",
    "replica_problems",
    "shared_state",
]

RESERVED_VOLUMES = frozenset({"state", "control-token"})
"""Volume names the operator gives its own volumes."""
MAX_POD_EXTRAS_BYTES = 64 * 1024
"""Bound on ``env`` + ``volumes`` + ``volumeMounts`` as JSON: they travel to the executors
inside one environment variable (the pod template), and Linux caps one at 128 KiB."""


@dataclass(frozen=True, slots=True)
class SpecProblem:
    """One broken rule: the field to change and why."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


def shared_state(spec: ReplicaSpec) -> bool:
    """Executors can reach the state: an object store / HDFS, or a ReadWriteMany claim."""
    if spec.state_uri is not None:
        return True
    return spec.storage is not None and "ReadWriteMany" in spec.storage.access_modes


def replica_problems(spec: ReplicaSpec) -> list[SpecProblem]:
    """Every rule ``spec`` breaks (empty: it is acceptable)."""
    return [*_state_problems(spec), *_volume_problems(spec)]


def _state_problems(spec: ReplicaSpec) -> list[SpecProblem]:
    instances = spec.executor.instances
    executors = f"executor.instances is {instances}"
    why = "executors run in other pods, often on other nodes, and must read and write the state"
    remedy = "or set executor.instances: 0 to run Spark inside the driver"
    if spec.storage is not None and spec.state_uri is not None:
        return [
            SpecProblem(
                "spec.stateUri",
                "spec.storage and spec.stateUri are mutually exclusive: the replica has one "
                "state location, a volume (storage) or an object store / HDFS (stateUri)",
            )
        ]
    if instances == 0 or spec.state_uri is not None:
        return []
    if spec.storage is None:
        return [
            SpecProblem(
                "spec.executor.instances",
                f"{executors} but neither spec.storage nor spec.stateUri is set: the state "
                f"would be an emptyDir in the driver pod only, and {why}; set spec.stateUri, "
                f"or spec.storage with accessModes [ReadWriteMany], {remedy}",
            )
        ]
    if "ReadWriteMany" not in spec.storage.access_modes:
        modes = ", ".join(spec.storage.access_modes)
        return [
            SpecProblem(
                "spec.storage.accessModes",
                f"[{modes}] lacks ReadWriteMany but {executors}: the claim is mounted on "
                f"every executor too, and {why}; use a ReadWriteMany storage class, or "
                f"spec.stateUri, {remedy}",
            )
        ]
    return []


def _volume_problems(spec: ReplicaSpec) -> list[SpecProblem]:
    problems: list[SpecProblem] = []
    names: set[str] = set()
    for index, volume in enumerate(spec.volumes):
        name = str(volume["name"])
        if name in RESERVED_VOLUMES:
            problems.append(
                SpecProblem(
                    f"spec.volumes[{index}].name",
                    f"{name!r} is the operator's own volume; choose another name",
                )
            )
        elif name in names:
            problems.append(SpecProblem(f"spec.volumes[{index}].name", f"{name!r} twice"))
        names.add(name)
    for index, mount in enumerate(spec.volume_mounts):
        if mount["name"] not in names:
            problems.append(
                SpecProblem(
                    f"spec.volumeMounts[{index}].name",
                    f"no volume {mount['name']!r} in spec.volumes",
                )
            )
        if not mount.get("mountPath"):
            problems.append(
                SpecProblem(f"spec.volumeMounts[{index}].mountPath", "required field is missing")
            )
    extras = [
        [e.to_wire() for e in spec.env],
        list(spec.volumes),
        list(spec.volume_mounts),
    ]
    size = len(json.dumps(extras, separators=(",", ":")))
    if size > MAX_POD_EXTRAS_BYTES:
        problems.append(
            SpecProblem(
                "spec.volumes",
                f"env, volumes and volumeMounts take {size} bytes as JSON, more than "
                f"{MAX_POD_EXTRAS_BYTES}: they reach the executors in one environment "
                "variable (the pod template); move bulk configuration into a ConfigMap",
            )
        )
    return problems
