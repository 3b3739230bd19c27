"""kopf's bookkeeping as the operator configures it."""

from __future__ import annotations

import kopf
from kopf._core.intents import causes

from dataflow_operator.controller import handlers
from dataflow_operator.controller.handlers import NoDiffBase, configure_settings


def test_no_handler_needs_the_diff_base_that_is_not_kept() -> None:
    """NoDiffBase makes every object look handled as it is: an ``on.create``,
    ``on.update``, ``on.resume`` or ``on.field`` handler would never be called. Only
    ``on.delete`` (a finalizer) may be registered among the changing handlers."""
    assert handlers.dataflow_handlers and handlers.replica_handlers  # registered
    registry = kopf.get_default_registry()
    changing = registry._changing.get_all_handlers()
    assert changing, "the Dataflow deletion handler is a changing handler"
    for handler in changing:
        assert handler.reason == causes.Reason.DELETE, handler
        assert handler.field is None, handler


def test_settings_keep_no_diff_base_and_put_the_rest_under_our_prefix() -> None:
    settings = kopf.OperatorSettings()
    configure_settings(settings)
    assert isinstance(settings.persistence.diffbase_storage, NoDiffBase)
    assert settings.persistence.finalizer == "dataflow.dev/finalizer"
    storage = settings.persistence.diffbase_storage
    body = kopf.Body({"metadata": {"name": "a"}, "spec": {"sql": "SELECT 1"}})
    assert storage.fetch(body=body) == storage.build(body=body) == {}
    patch = kopf.Patch()
    storage.store(body=body, patch=patch, essence=storage.build(body=body))
    assert not patch
