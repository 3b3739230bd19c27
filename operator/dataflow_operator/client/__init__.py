"""Clients of a running replica from outside it: ``dataflow-operator subscribe`` and ``peek``.

They reach the replica's control API (:mod:`dataflow_operator.runtime.serve`) either
directly (``--address HOST:PORT``) or through the Kubernetes API server's service proxy
with the user's kubeconfig (:mod:`.kube`), and print what it streams. This package builds
on ``api``/``core`` and the ``kubernetes`` client only: it imports neither the runtime
(Spark) nor the controller (kopf), which import-linter enforces.
"""
