"""dataflow-operator: continuously maintained Spark SQL dataflows on Kubernetes.

Layers, from the inside out:

- :mod:`dataflow_operator.core` — the pure domain (time, frontiers, expiration, timelines,
  hydration, conditions). No I/O, no Kubernetes, no Spark; ``now`` is always a parameter.
- :mod:`dataflow_operator.api` — pydantic models of the custom resources and of the
  operator↔replica protocol; the single source of the CRD schemas.
- :mod:`dataflow_operator.controller` — the kopf operator.
- :mod:`dataflow_operator.runtime` — the PySpark program that runs in a replica's driver.
"""

__version__ = "0.1.0"
