"""The operator: kopf handlers that reconcile Replicas and Dataflows.

:mod:`.handlers` registers every handler with kopf; each is thin (parse the body with
the api models → call pure functions → act → patch status). A Replica's reconciliation
lives in :mod:`.replica` (its pure ``decide`` is a state machine tested as data), a
Dataflow's handlers and status writer in :mod:`.dataflow`; what both rooms share (the
operator's in-memory state, the clusters' views, the Dataflows' rules) in
:mod:`.shared`; :mod:`.manifests` builds objects with pure functions; replicas are
reached through :mod:`.control_client`, the API server through :mod:`.kube`;
:mod:`.errors` is the one place errors become kopf's.

Imports go one way: ``command`` > ``handlers`` > ``replica`` | ``dataflow`` > ``shared``
> the rest (the ``layers`` contracts in ``pyproject.toml``).
"""
