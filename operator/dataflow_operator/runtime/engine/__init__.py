"""The replica engine: a cluster's dataflows maintained on one Spark session.

- :mod:`.engine`: :class:`~.engine.Engine`, the replica service
  (:class:`~dataflow_operator.runtime.service.ReplicaService`) the control API calls:
  apply, report, step, run until expiration;
- :mod:`.running`: one installed dataflow, its query, cancellation scope and status;
  :mod:`.sink` writes its batches from the executors;
- :mod:`.expiry`: a dataflow's expiration and ``until`` from the core's rules;
- :mod:`.layout`: where a dataflow's files live in the state location;
- :mod:`.release`: consumed input released upstream (design 3);
- :mod:`.drops`: dropping dataflows, each drop's duration counted by :mod:`.shutdowns`;
- :mod:`.attempt_state`: make-before-break attempts, each with its own state.
"""
