# kopf types its callbacks as protocols listing every kwarg it may pass; handlers that
# take only some (plus index kwargs, which the protocols cannot name) do not match them.
# mypy: disable-error-code="arg-type"
"""The operator's lifecycle in kopf, and every registration.

Importing this module registers the handlers in kopf's default registry: the operator's
start-up (clients, shared state, status writer, metrics) and clean-up here, each
resource's handlers in its room (:mod:`.replica.kopf_handlers`,
:mod:`.dataflow.kopf_handlers`). Settings put kopf's own bookkeeping (progress,
finalizer) under the ``dataflow.dev`` prefix in annotations; nothing of kopf's lands in
status, and no diff base is kept (see :class:`NoDiffBase`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import kopf

from dataflow_operator.api.meta import GROUP
from dataflow_operator.controller.config import OperatorConfig
from dataflow_operator.controller.control_client import ControlClient
from dataflow_operator.controller.dataflow import kopf_handlers as dataflow_handlers
from dataflow_operator.controller.dataflow.status_writer import run_status_writer
from dataflow_operator.controller.events import REPORTING_COMPONENT
from dataflow_operator.controller.kube import KubeApi
from dataflow_operator.controller.naming import FINALIZER
from dataflow_operator.controller.replica import kopf_handlers as replica_handlers
from dataflow_operator.controller.shared.state import OperatorState
from dataflow_operator.controller.standby import PEERING_LIFETIME

__all__ = ["configure_settings", "dataflow_handlers", "replica_handlers"]
# dataflow_handlers and replica_handlers are imported for what importing them does:
# their handlers register with kopf.


class NoDiffBase(kopf.DiffBaseStorage):
    """kopf's diff base, kept nowhere: every object looks unchanged since last handled.

    kopf stores a copy of each object's spec (``last-handled-configuration``) to tell
    creation and updates apart for ``on.create``/``on.update``/``on.resume`` handlers.
    This operator has none: it reconciles from every watch event and the indexes, and
    only ``on.delete`` (a finalizer) is a changing handler, which needs no diff base.
    Storing it cost a patch per object and more, as each status write racing it made
    kopf patch it again (three such patches of one Dataflow in a 200-Dataflow run), and
    each patch came back as a watch event to handle.
    ``tests/controller/test_kopf_settings.py`` fails if a handler needing it is added.
    """

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> kopf.BodyEssence:
        """The same empty essence for every object: nothing to compare."""
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        """As if the object were handled as it is now."""
        return kopf.BodyEssence()

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        """Nothing to keep."""


def configure_settings(settings: kopf.OperatorSettings) -> None:
    """kopf's bookkeeping under our prefix, in annotations; only warnings become Events."""
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = NoDiffBase()
    settings.posting.level = logging.WARNING
    settings.posting.reporting_component = REPORTING_COMPONENT
    settings.background.cancellation_polling = 5
    settings.peering.lifetime = PEERING_LIFETIME


@kopf.on.startup()
async def startup(
    *,
    settings: kopf.OperatorSettings,
    memo: kopf.Memo,
    **_: Any,
) -> None:
    """Build the clients and the shared state once; start the status writer and metrics."""
    configure_settings(settings)
    config: OperatorConfig = memo.get("config") or OperatorConfig()
    state = OperatorState(config, await KubeApi.connect(), ControlClient())
    memo["state"] = state
    if config.metrics_port:
        state.metrics.serve(config.metrics_port)
    memo["writer"] = asyncio.create_task(run_status_writer(state))


@kopf.on.cleanup()
async def cleanup(*, memo: kopf.Memo, **_: Any) -> None:
    """Stop the status writer and close the HTTP sessions."""
    writer = memo.get("writer")
    if writer is not None:
        writer.cancel()
    state: OperatorState | None = memo.get("state")
    if state is not None:
        await state.kube.close()
        await state.control.close()
