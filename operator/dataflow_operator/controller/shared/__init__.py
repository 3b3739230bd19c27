"""What the Replica and Dataflow rooms share: the operator's in-memory state and its parts.

:mod:`.state` holds the clients and three parts, each filled by one room and read by
the other: :mod:`.registry` (each Replica daemon's attempts and last reports, with
:mod:`.observation`'s pod and claim facts), :mod:`.views` (each cluster's Dataflows
parsed and validated by :mod:`.dataflow_logic`'s pure rules) and :mod:`.status_queue`
(the Dataflows whose status must be written). :mod:`.release_meet` works out how far
each source may be released cluster-wide. Nothing here imports either room.
"""
