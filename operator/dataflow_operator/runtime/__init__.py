"""The replica runtime: the PySpark program that runs in a replica's driver.

It maintains every dataflow of its cluster as a Spark Structured Streaming query, each
under its own cancellation scope (a job group and tag), and reports frontiers,
expiration and hydration. Its rooms, by what they hold:

- :mod:`.sources`: each source is a Python streaming data source whose offsets carry its
  *upper* (the logical time, epoch ms, up to which it is complete): from the dataflow's
  clock file (``table``/``files``), the upstream's recorded upper (``dataflow``) or the
  updates' own times (``changelog``). Spark's offset log therefore records the logical
  time of every batch, and a restart resumes from the checkpoint. What a source read is
  kept in its ingested collection (design 3).
- :mod:`.strategies`: a dataflow's spec turned into a streaming DataFrame of its output
  changelog. The core plans the SQL (:func:`dataflow_operator.core.incremental.plan_query`);
  temporal filters, GROUP BY, equi-joins, DISTINCT and set operations run in Spark state
  (``transformWithStateInPandas``), everything else by recompute-and-diff.
- :mod:`.engine`: one running query per dataflow (:mod:`.engine.running`), its sink, its
  files (:mod:`.engine.layout`), the release of consumed input, and
  :class:`~dataflow_operator.runtime.engine.engine.Engine`, which implements
  :class:`~dataflow_operator.runtime.service.ReplicaService`: it computes each dataflow's
  expiration and ``until`` with the core rules and never runs a batch at or past the
  replica's expiration.
- :mod:`.hydration`: Spark's executed plan walked into the core's node ids, and the
  tracking of which nodes have processed the snapshot (the rules are the core's).
- :mod:`.serve`: the control API (aiohttp) and ``/metrics`` (``prometheus_client``).
- :mod:`.cli`: the commands that run Spark: ``run``, ``replica``, ``insert``, ``explain``.

Beside them, what every room shares: :mod:`.session` (the one place that starts Spark),
:mod:`.storage` (every read and write of the state location), :mod:`.changelog_store`
(a changelog in Parquet parts), :mod:`.clock` (the logical time of each batch, written
by the engine and read by the sources), :mod:`.inserts` (rows appended to a table),
:mod:`.token` (cancellation scopes), :mod:`.values`, :mod:`.errors` and :mod:`.service`
(the seam between the engine and the control API).

Imports go one way: ``cli`` > ``engine`` | ``serve`` > ``strategies`` > ``sources`` >
what they share (the ``layers`` contracts in ``pyproject.toml`` say it module by module).
"""
