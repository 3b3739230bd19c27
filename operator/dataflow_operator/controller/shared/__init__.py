"""What the Replica and Dataflow rooms share: the operator's in-memory state and its parts.

:mod:`.state` holds the clients and the parts each room owns and the other reads.
"""
