"""Dataflows: validation within their cluster, and their status.

:mod:`.handlers` validates a Dataflow on every watch event (against the whole cluster,
since a dataflow may read others) and waits for replicas to drop it on deletion;
:mod:`.logic` holds the pure rules (validity, the desired set, the status from every
replica's report); :mod:`.status_writer` is the one writer of Dataflow status;
:mod:`.release_meet` works out how far each source may be released cluster-wide.
"""
