"""What memory a driver and an executor pod get: heap, overhead and the pod's limit.

A pod's memory request and limit are its JVM heap (``memory``) plus an overhead for
everything else in the container (``memoryOverhead``, else computed here):

- the driver runs the replica's Python process, the JVM and, in local mode, the Python
  workers: Spark's rule for Python drivers, ``max(384Mi, 40 % of the heap)``;
- an executor runs the JVM and one Python worker per core (Python sources, UDFs,
  ``transformWithStateInPandas``): Spark's JVM overhead ``max(384Mi, 10 % of the
  heap)`` plus :data:`PYTHON_WORKER_BYTES` per core. Spark would give executors of a
  PySpark application in client mode only the JVM part (it adds Python memory only to
  applications submitted as Python files), so the operator passes the sum as
  ``spark.executor.memoryOverhead``.

The operator builds the driver pod with :func:`driver_memory`; Spark builds executor
pods with ``spark.executor.memory`` + ``spark.executor.memoryOverhead`` as both request
and limit. :func:`sizing_table` renders both for common sizes (``docs/sizing.md``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dataflow_operator.api.replica import DriverResources, ExecutorResources
from dataflow_operator.controller.manifests.common import quantity_bytes

__all__ = [
    "DRIVER_OVERHEAD_FACTOR",
    "EXECUTOR_JVM_OVERHEAD_FACTOR",
    "MIN_OVERHEAD_BYTES",
    "PYTHON_WORKER_BYTES",
    "SIZES",
    "PodMemory",
    "driver_memory",
    "executor_memory",
    "sizing_table",
]

MiB = 2**20
MIN_OVERHEAD_BYTES = 384 * MiB
"""Spark's smallest memory overhead (``spark.{driver,executor}.minMemoryOverhead``)."""
DRIVER_OVERHEAD_FACTOR = 0.4
"""Spark's overhead factor for Python drivers (its non-JVM factor)."""
EXECUTOR_JVM_OVERHEAD_FACTOR = 0.1
"""Spark's overhead factor for a JVM (``spark.executor.memoryOverheadFactor``)."""
PYTHON_WORKER_BYTES = 384 * MiB
"""Room for the Python worker of one executor core (and its share of the daemon)."""
SIZES: tuple[tuple[int, str], ...] = (
    (1, "512Mi"),
    (1, "1Gi"),
    (2, "2Gi"),
    (2, "4Gi"),
    (4, "8Gi"),
    (8, "16Gi"),
)
"""(cores, memory) of the sizes ``docs/sizing.md`` lists; ``1, 1Gi`` is the default."""


@dataclass(frozen=True, slots=True)
class PodMemory:
    """A pod's JVM heap and overhead; its memory request and limit are their sum."""

    heap: int
    """Bytes of JVM heap (``-Xmx``)."""
    overhead: int
    """Bytes for everything else in the container."""

    @property
    def limit_mib(self) -> int:
        """The pod's memory request and limit, in whole MiB (rounded up)."""
        return math.ceil((self.heap + self.overhead) / MiB)

    @property
    def limit(self) -> str:
        """The same as a Kubernetes quantity (``1434Mi``)."""
        return f"{self.limit_mib}Mi"


def driver_memory(driver: DriverResources) -> PodMemory:
    """The driver pod's memory: its heap plus ``memoryOverhead``, else Spark's rule for
    Python drivers."""
    heap = quantity_bytes(driver.memory)
    if driver.memory_overhead:
        return PodMemory(heap, quantity_bytes(driver.memory_overhead))
    return PodMemory(heap, max(MIN_OVERHEAD_BYTES, math.ceil(heap * DRIVER_OVERHEAD_FACTOR)))


def executor_memory(executor: ExecutorResources) -> PodMemory:
    """An executor pod's memory: its heap plus ``memoryOverhead``, else the JVM's
    overhead and a Python worker per core (see the module docstring)."""
    heap = _whole_mib(quantity_bytes(executor.memory))  # Spark counts whole MiB
    if executor.memory_overhead:
        return PodMemory(heap, _whole_mib(quantity_bytes(executor.memory_overhead)))
    jvm = max(MIN_OVERHEAD_BYTES, math.ceil(heap * EXECUTOR_JVM_OVERHEAD_FACTOR))
    return PodMemory(heap, _whole_mib(jvm + PYTHON_WORKER_BYTES * executor.cores))


def _whole_mib(size: int) -> int:
    return max(1, math.ceil(size / MiB)) * MiB


def _mib(size: int) -> str:
    return f"{math.ceil(size / MiB)}Mi"


def sizing_table(sizes: tuple[tuple[int, str], ...] = SIZES) -> str:
    """A Markdown table of what a Replica whose driver and executors ask for each of
    ``sizes`` gets: heap, overhead and the pod's memory (request = limit) and CPU."""
    lines = [
        "| `cores`, `memory` | heap | driver overhead | driver pod | "
        "executor overhead | executor pod |",
        "|---|---|---|---|---|---|",
    ]
    for cores, memory in sizes:
        driver = driver_memory(DriverResources(cores=cores, memory=memory))
        executor = executor_memory(ExecutorResources(cores=cores, memory=memory))
        lines.append(
            f"| {cores}, {memory} | {_mib(driver.heap)} | {_mib(driver.overhead)} | "
            f"{cores} CPU, {driver.limit} | {_mib(executor.overhead)} | "
            f"{cores} CPU, {executor.limit} |"
        )
    return "\n".join(lines) + "\n"
