"""The operator: kopf handlers that reconcile Replicas and Dataflows.

Handlers are thin (parse the body with the api models → call pure functions → patch
status); manifests are built by pure functions; replicas are reached through the
control-API client.
"""
