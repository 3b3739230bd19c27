"""CustomResourceDefinitions generated from the pydantic models.

pydantic emits JSON Schema 2020-12; the Kubernetes API server wants a *structural*
OpenAPI v3 schema. :func:`structural` translates: it inlines ``$ref``, turns
``anyOf: [X, null]`` into ``X`` with ``nullable: true``, drops ``title`` and ``default``
(the operator applies defaults itself, so that "absent" keeps its meaning), turns
``const`` into a one-value ``enum``, and marks free-form maps with
``x-kubernetes-preserve-unknown-fields``.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from dataflow_operator.api.dataflow import Dataflow, SourceKind
from dataflow_operator.api.meta import GROUP, VERSION
from dataflow_operator.api.replica import Replica

__all__ = ["CRD_FILES", "all_crds", "check_files", "crd_for", "render", "structural", "write_files"]

CATEGORY = "dataflow-operator"
CRD_FILES: dict[str, type[Dataflow] | type[Replica]] = {
    "dataflows.yaml": Dataflow,
    "replicas.yaml": Replica,
}
_DROPPED_KEYS = {"title", "default", "$defs", "discriminator"}
_RST_LITERAL = re.compile(r"``([^`]+)``")


def _resolve(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_resolve(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = copy.deepcopy(defs[node["$ref"].rsplit("/", 1)[-1]])
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _resolve(merged, defs)
    return {key: _resolve(value, defs) for key, value in node.items()}


def _is_null(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("type") == "null"


def _clean(node: Any) -> Any:
    if isinstance(node, list):
        return [_clean(item) for item in node]
    if not isinstance(node, dict):
        return node
    default = node.get("default")
    node = {key: value for key, value in node.items() if key not in _DROPPED_KEYS}
    any_of = node.get("anyOf")
    if isinstance(any_of, list) and any(_is_null(option) for option in any_of):
        options = [option for option in any_of if not _is_null(option)]
        if len(options) != 1:
            raise ValueError(f"cannot express a union of {len(options)} types structurally")
        outer = {key: value for key, value in node.items() if key != "anyOf"}
        node = {**options[0], **outer, "nullable": True}
    if "const" in node:
        node["enum"] = [node.pop("const")]
    if node.get("additionalProperties") is True or (
        node.get("type") == "object"
        and "properties" not in node
        and "additionalProperties" not in node
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ):
        node.pop("additionalProperties", None)
        node["x-kubernetes-preserve-unknown-fields"] = True
    if default not in (None, "", [], {}) and isinstance(node.get("description"), str):
        shown = default if isinstance(default, str) else json.dumps(default)
        node["description"] = f"{node['description'].rstrip()} Default: {shown}."
    if node.get("additionalProperties") is False:
        # Structural schemas forbid it beside properties; the API server prunes unknown
        # fields instead, and `kubectl apply --validate=strict` reports them.
        del node["additionalProperties"]
    if isinstance(node.get("description"), str):
        node["description"] = _RST_LITERAL.sub(r"\1", node["description"])
    node = {key: value for key, value in node.items() if key not in _DROPPED_KEYS}
    return {
        key: value if key in ("enum", "required") else _clean(value) for key, value in node.items()
    }


def structural(model: type[BaseModel]) -> dict[str, Any]:
    """The structural OpenAPI v3 schema of ``model``, as a CRD's ``openAPIV3Schema``."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    defs = raw.pop("$defs", {})
    schema: dict[str, Any] = _clean(_resolve(raw, defs))
    # The API server owns metadata's schema; a CRD may only say it is an object.
    schema["properties"]["metadata"] = {"type": "object"}
    return schema


def _source_one_of(schema: dict[str, Any]) -> None:
    """Let the API server enforce "exactly one source kind" too."""
    source = schema["properties"]["spec"]["properties"]["sources"]["items"]
    source["oneOf"] = [{"required": [kind.value]} for kind in SourceKind]


def _column(name: str, path: str, kind: str = "string", **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": kind, "jsonPath": path, **extra}


_AGE = _column("Age", ".metadata.creationTimestamp", "date")

_DEFINITIONS: dict[str, dict[str, Any]] = {
    "Dataflow": {
        "plural": "dataflows",
        "short_names": ["df"],
        "columns": [
            _column("Cluster", ".spec.cluster"),
            _column("Kind", ".spec.kind"),
            _column("Hydrated", '.status.conditions[?(@.type=="Hydrated")].status'),
            _column("Frontier", ".status.frontier"),
            _column("Strategy", ".status.strategy", priority=1),
            _AGE,
        ],
    },
    "Replica": {
        "plural": "replicas",
        "short_names": ["dfr"],
        "columns": [
            _column("Cluster", ".spec.cluster"),
            _column("Ready", '.status.conditions[?(@.type=="Ready")].status'),
            _column("Expires", ".status.expiresAt"),
            _column("Restarts", ".status.totalRestarts", "integer"),
            _column("Driver", ".status.driverPod"),
            _column("Successor", ".status.handover.driverPod", priority=1),
            _column("Strategy", ".status.restartStrategy", priority=1),
            _column("Executors", ".status.executors", priority=1),
            _AGE,
        ],
    },
}


def crd_for(model: type[Dataflow] | type[Replica]) -> dict[str, Any]:
    """The CustomResourceDefinition of one of the two kinds."""
    kind = model.model_fields["kind"].default
    definition = _DEFINITIONS[kind]
    schema = structural(model)
    schema["description"] = (model.__doc__ or kind).strip().splitlines()[0]
    if kind == "Dataflow":
        _source_one_of(schema)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{definition['plural']}.{GROUP}",
            "labels": {"app.kubernetes.io/name": "dataflow-operator"},
        },
        "spec": {
            "group": GROUP,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": definition["plural"],
                "singular": kind.lower(),
                "shortNames": definition["short_names"],
                "categories": [CATEGORY],
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": definition["columns"],
                    "schema": {"openAPIV3Schema": schema},
                }
            ],
        },
    }


def all_crds() -> dict[str, dict[str, Any]]:
    """File name → CRD, for both kinds."""
    return {name: crd_for(model) for name, model in CRD_FILES.items()}


def render(crd: dict[str, Any]) -> str:
    """The CRD as the YAML file written to disk."""
    header = "# Generated by `dataflow-operator crds` from dataflow_operator.api; do not edit.\n"
    return header + yaml.safe_dump(crd, sort_keys=False, width=100)


def write_files(directories: list[Path]) -> list[Path]:
    """Write every CRD into each directory; return the paths written."""
    written = []
    for directory in directories:
        directory.mkdir(parents=True, exist_ok=True)
        for name, crd in all_crds().items():
            path = directory / name
            path.write_text(render(crd))
            written.append(path)
    return written


def check_files(directories: list[Path]) -> list[str]:
    """One line per CRD file that is missing or differs from what the models generate."""
    problems = []
    for directory in directories:
        for name, crd in all_crds().items():
            path = directory / name
            if not path.exists():
                problems.append(f"{path}: missing; run `make crds`")
            elif path.read_text() != render(crd):
                problems.append(f"{path}: out of date with dataflow_operator.api; run `make crds`")
    return problems
