"""A dataflow's sources as Spark streaming sources, and what they read, kept durably.

- :mod:`.reader`: every source kind as one Python data source whose offsets carry the
  source's upper, so that Spark's offset log records the logical time of each batch.
- :mod:`.ingested`: a source's ingested collection (design 3), the replay of expiration
  restarts and changed specs.
"""
