"""``dataflow-operator operator``: run the operator (kopf under the hood).

kopf's useful flags pass through: ``--namespace``/``-n`` (repeatable, globs allowed),
``--all-namespaces``/``-A``, ``--standalone`` or ``--peering NAME`` with ``--priority``
(default with peering: by seniority, see :mod:`~dataflow_operator.controller.standby`),
and ``--liveness URL`` (e.g. ``http://0.0.0.0:8080/healthz``). The operator's own
settings are flags or environment variables: see
:class:`~dataflow_operator.controller.config.OperatorConfig`.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import sys
import time
from collections.abc import MutableMapping
from typing import Any

import kopf
import structlog

from dataflow_operator.controller.config import (
    ConfigError,
    add_config_arguments,
    config_from_args,
)
from dataflow_operator.controller.standby import seniority_priority
from dataflow_operator.logs import configure_logging, get_logger

__all__ = ["configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``operator``."""
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument(
        "-n",
        "--namespace",
        action="append",
        default=[],
        metavar="NS",
        help="watch this namespace (repeatable; globs like 'team-*' allowed)",
    )
    scope.add_argument("-A", "--all-namespaces", action="store_true", help="watch every namespace")
    peering = parser.add_mutually_exclusive_group()
    peering.add_argument(
        "--standalone", action="store_true", help="no peering with other operator instances"
    )
    peering.add_argument("--peering", metavar="NAME", help="kopf peering object name")
    parser.add_argument(
        "--priority",
        type=int,
        default=None,
        help="priority within peering (default: the earlier started, the higher)",
    )
    parser.add_argument(
        "--liveness", metavar="URL", help="serve a liveness probe, e.g. http://0.0.0.0:8080/healthz"
    )
    parser.add_argument("--log-level", default=None, help="DEBUG, INFO (default), WARNING…")
    add_config_arguments(parser)


def _object_context(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """Lift kopf's ``k8s_ref`` (on its per-object log records) into namespace/name fields."""
    record = event.get("_record")
    ref = getattr(record, "k8s_ref", None)
    if isinstance(ref, dict):
        event.setdefault("namespace", ref.get("namespace"))
        event.setdefault("name", ref.get("name"))
        event.setdefault("kind", ref.get("kind"))
    return event


def _add_object_context() -> None:
    for handler in logging.getLogger().handlers:
        formatter = handler.formatter
        if isinstance(formatter, structlog.stdlib.ProcessorFormatter):
            chain = list(formatter.foreign_pre_chain or ())
            formatter.foreign_pre_chain = (_object_context, *chain)


def run(args: argparse.Namespace) -> int:
    """Run the operator until interrupted."""
    configure_logging(level=args.log_level)
    _add_object_context()
    if logging.getLogger().level > logging.DEBUG:
        # kopf logs every successful handler call; at scale that is noise, not signal
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    try:
        config = config_from_args(args)
    except ConfigError as error:
        print(f"dataflow-operator operator: error: {error}", file=sys.stderr)
        return 2
    importlib.import_module("dataflow_operator.controller.handlers")
    log = get_logger("dataflow_operator.operator")
    log.info(
        "starting",
        namespaces=args.namespace or None,
        all_namespaces=args.all_namespaces,
        default_image=config.default_image,
        default_expiration_offset=str(config.default_expiration_offset),
    )
    priority = args.priority
    if priority is None and args.peering:
        priority = seniority_priority(int(time.time() * 1000))
    asyncio.run(
        kopf.operator(
            clusterwide=args.all_namespaces,
            namespaces=args.namespace,
            standalone=True if args.standalone else None,
            peering_name=args.peering,
            priority=priority,
            liveness_endpoint=args.liveness,
            memo=kopf.Memo(config=config),
        )
    )
    return 0
