"""Dataflows: their kopf handlers and the one writer of their status.

:mod:`.kopf_handlers` registers the handlers: :mod:`.changes` validates a Dataflow on
every watch event (against the whole cluster, since a dataflow may read others) and
waits for replicas to drop it on deletion; :mod:`.status_writer` is the one writer of
Dataflow status, whose frontier-only writes :mod:`.progress_budget` sheds first when the
operator is busy. The pure rules (validity, the desired set, the status from every
replica's report) and the cluster-wide release meet are shared with the Replica room:
:mod:`~dataflow_operator.controller.shared`.
"""
