"""The generated CRDs: up to date on disk, and structural as the API server requires.

CI has no API server to reject a bad schema, so the structural rules are checked here:
https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#specifying-a-structural-schema
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from dataflow_operator.api.crds import all_crds, check_files, render, write_files

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = {"$ref", "$defs", "definitions", "title", "const", "default"}
VALUE_VALIDATION_ONLY = {"oneOf", "anyOf", "allOf", "not"}


def walk(schema: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    found = [(path, schema)]
    for name, child in schema.get("properties", {}).items():
        found += walk(child, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        found += walk(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        found += walk(schema["additionalProperties"], f"{path}{{}}")
    return found


def structural_violations(schema: dict[str, Any]) -> list[str]:
    problems = []
    for path, node in walk(schema):
        for key in FORBIDDEN & node.keys():
            problems.append(f"{path}: has {key}")
        untyped_ok = node.get("x-kubernetes-int-or-string") or node.get(
            "x-kubernetes-preserve-unknown-fields"
        )
        if "type" not in node and not untyped_ok:
            problems.append(f"{path}: no type")
        if "properties" in node and "additionalProperties" in node:
            problems.append(f"{path}: properties and additionalProperties together")
        for combinator in VALUE_VALIDATION_ONLY & node.keys():
            for option in node[combinator]:
                if {"type", "properties", "items", "nullable", "description"} & option.keys():
                    problems.append(f"{path}: {combinator} may only hold value validations")
        if node.get("type") == "array" and "items" not in node:
            problems.append(f"{path}: array without items")
        if node.get("x-kubernetes-list-type") == "map":
            keys = node.get("x-kubernetes-list-map-keys")
            item = node["items"]
            if not keys:
                problems.append(f"{path}: list-type map without list-map-keys")
            for key in keys or []:
                if key not in item.get("required", []):
                    problems.append(f"{path}: map key {key} is not required in items")
        if node.get("x-kubernetes-preserve-unknown-fields") and path.endswith(
            ("spec", "status", "sources[]")
        ):
            problems.append(f"{path}: preserve-unknown-fields on a typed object")
    return problems


@pytest.mark.parametrize("name", ["dataflows.yaml", "replicas.yaml"])
def test_schemas_are_structural(name: str) -> None:
    crd = all_crds()[name]
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert structural_violations(schema) == []
    assert schema["properties"]["metadata"] == {"type": "object"}


def test_the_structural_check_catches_what_pydantic_emits_raw() -> None:
    from dataflow_operator.api.dataflow import Dataflow

    raw = Dataflow.model_json_schema(by_alias=True)
    spec = raw["$defs"]["DataflowSpec"]
    assert structural_violations(spec), "the checker must flag pydantic's unprocessed schema"


@pytest.mark.parametrize("name", ["dataflows.yaml", "replicas.yaml"])
def test_every_field_is_described(name: str) -> None:
    schema = all_crds()[name]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    undocumented = [
        path
        for path, node in walk(schema)
        if path.count(".") >= 2
        and not node.get("description")
        and not path.endswith("{}")
        and not (path.endswith("[]") and node.get("type") != "object")
    ]
    assert undocumented == []


def test_crds_have_status_subresource_columns_short_names_and_category() -> None:
    crds = all_crds()
    columns = {
        name: [c["name"] for c in crd["spec"]["versions"][0]["additionalPrinterColumns"]]
        for name, crd in crds.items()
    }
    assert columns["dataflows.yaml"] == [
        "Cluster",
        "Kind",
        "Hydrated",
        "Frontier",
        "Strategy",
        "Age",
    ]
    assert columns["replicas.yaml"] == [
        "Cluster", "Ready", "Expires", "Restarts", "Driver", "Successor", "Strategy", "Executors", "Age",
    ]  # fmt: skip
    for crd in crds.values():
        version = crd["spec"]["versions"][0]
        assert version["subresources"] == {"status": {}}
        assert crd["spec"]["names"]["shortNames"]
        assert crd["spec"]["names"]["categories"] == ["dataflow-operator"]
        assert crd["spec"]["group"] == "dataflow.dev" and version["name"] == "v1alpha1"


def test_keyed_lists_are_list_maps() -> None:
    schema = all_crds()["dataflows.yaml"]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    replicas = schema["properties"]["status"]["properties"]["replicas"]
    assert replicas["x-kubernetes-list-map-keys"] == ["replica"]
    assert replicas["items"]["properties"]["nodes"]["x-kubernetes-list-map-keys"] == ["id"]
    sources = schema["properties"]["spec"]["properties"]["sources"]
    assert sources["x-kubernetes-list-map-keys"] == ["name"]
    assert len(sources["items"]["oneOf"]) == 5


def test_files_on_disk_match_the_models() -> None:
    assert check_files([ROOT / "crds", ROOT / "charts/dataflow-operator/crds"]) == []


@pytest.mark.slow
def test_crds_check_command_detects_drift(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "dataflow_operator", "crds", "--check", "--out", str(tmp_path)]
    missing = subprocess.run(command, capture_output=True, text=True, check=False)
    assert missing.returncode == 1 and "missing" in missing.stderr
    write_files([tmp_path])
    assert subprocess.run(command, capture_output=True, check=False).returncode == 0
    (tmp_path / "replicas.yaml").write_text("# edited by hand\n")
    drifted = subprocess.run(command, capture_output=True, text=True, check=False)
    assert drifted.returncode == 1 and "out of date" in drifted.stderr


def test_repository_crds_check_passes() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "dataflow_operator", "crds", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_rendered_yaml_round_trips() -> None:
    for crd in all_crds().values():
        assert yaml.safe_load(render(crd)) == crd
