"""The replica runtime: the PySpark program that runs in a replica's driver.

It maintains every dataflow of its cluster as a Spark Structured Streaming query, each
under its own cancellation scope (a job group and tag), and reports frontiers,
expiration and hydration.

How a dataflow runs (one query per dataflow, Spark's own machinery throughout):

- :mod:`.source_reader`: each source is a Python streaming data source whose offsets
  carry its *upper* (the logical time, epoch ms, up to which it is complete): from the
  dataflow's clock file (``table``/``files``), the upstream's recorded upper (``dataflow``)
  or the updates' own times (``changelog``). Spark's offset log therefore records the
  logical time of every batch, and a restart resumes from the checkpoint.
- :mod:`.build`: the core plans the SQL (:func:`dataflow_operator.core.incremental.plan_query`);
  an event-time watermark on each source's batch time (fed by a heartbeat row per batch)
  is the inputs' frontier; temporal filters run in :mod:`.temporal_filter`, GROUP BY
  count/sum/avg in :mod:`.aggregate`, equi-joins in :mod:`.join`, DISTINCT and set
  operations in :mod:`.multiset` (all ``transformWithStateInPandas``), everything else
  by recompute-and-diff (:mod:`.general`).
- :mod:`.running`: the query's sink writes each batch's updates and the new upper to the
  dataflow's changelog directory (:mod:`.changelog_store`), which downstream dataflows
  read, MaterializedViews use as their sink and Index peeks consolidate.
- :mod:`.engine`: :class:`~dataflow_operator.runtime.engine.Engine` implements
  :class:`~dataflow_operator.runtime.service.ReplicaService`, computes each dataflow's
  expiration and ``until`` with the core rules, and runs the clock: updates at or past
  ``until`` are dropped before they enter state, and no batch runs at or past the
  replica's expiration (exit code ``EXIT_EXPIRED``).

Entry points: ``dataflow-operator run`` (:mod:`.run_command`, local), ``insert``
(:mod:`.insert_command`), and ``replica`` (the driver pod).
"""
