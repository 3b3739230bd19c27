"""Hydration of a dataflow's physical plan nodes, on the JVM side.

The rules are the core's (:mod:`dataflow_operator.core.hydration`); the numbering of
nodes is the core's too (:mod:`dataflow_operator.core.plan`). Here: :mod:`.plan` walks
Spark's executed plan into the core's values, and :mod:`.tracker` follows each node's
progress through the snapshot from Spark's status tracker.
"""
