"""How a dataflow is maintained: one strategy per shape of query, chosen by the core.

:mod:`.build` turns a spec into a streaming DataFrame of the output changelog and picks
the strategy the core planned (:class:`dataflow_operator.core.incremental.MaintenancePlan`):

- :mod:`.temporal_filter`: ``mz_now()`` bounds, with retractions held in state until due;
- :mod:`.aggregate`: GROUP BY with count/sum/avg (and min/max) in state;
- :mod:`.join`: equi-joins, each side's rows in state (:mod:`.join_rows`);
- :mod:`.multiset`: DISTINCT and set operations;
- :mod:`.top_n`: ``ROW_NUMBER() … <= N``, the ranked rows per partition;
- :mod:`.sessions`: ``GROUP BY session_window(…)``'s sessionizer, each row's session;
- :mod:`.general`: everything else, recomputed and diffed (:mod:`.fuse` makes its
  cancellation prompt).

Each stateful operator is ``transformWithStateInPandas``; :mod:`.held` is what they share.
Their processors (:mod:`.temporal_filter`'s, :mod:`.aggregate`, :mod:`.arrangement` for
joins, :mod:`.row_counts` for set operations, :mod:`.top_n_rows` for top-Ns,
:mod:`.session_rows` for session windows) live in
modules light to import: Spark's pre-init runner unpickles each in a new Python process at
every query start.
"""

STATE_FORMAT = 11
"""The layout of the stateful operators' state, raised whenever one changes or a query may be
given another strategy (2: the aggregate's group totals and the set operations' row counts
in chunks; 3: a join key's rows inline or in fragments, :mod:`.join_rows`; 4: state keys
named by the labels of :mod:`.buckets`; 5: a join key's meta holds its fragments' row
counts; 6: an aggregate over a join holds its partial sums until the watermark, the join no
longer its rows; 7: comma joins, inner joins with residual conditions and ``FILTER``
aggregates are maintained incrementally, where their checkpoints were recompute's,
:mod:`dataflow_operator.core.sql_rewrites`; 8: top-Ns are, :mod:`.top_n`; 9: so are
queries of maintained subqueries, :mod:`dataflow_operator.core.derived`; 10: so are
session windows, :mod:`dataflow_operator.core.session`; 11: an aggregate's TIMESTAMP and
STRUCT group keys held as numbers, :mod:`.flat_keys`). A dataflow
whose checkpoint another layout wrote starts over (it re-reads its input from its sources'
ingested collections) instead of reading state it cannot: see
:func:`~dataflow_operator.runtime.engine.install.state_fingerprint`.
"""
