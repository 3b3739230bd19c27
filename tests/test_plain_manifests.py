"""The kustomize base (deploy/kustomize/) is the chart's render, current, and builds."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
BIN = ROOT / ".venv/bin"

pytestmark = pytest.mark.skipif(
    not (BIN / "helm").exists() or not (BIN / "kubectl").exists(),
    reason="helm/kubectl are not installed: run `python tools/install_k8s_tools.py .venv/bin`",
)


def test_the_base_is_generated_from_the_current_chart() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools/render_kustomize.py"), str(BIN), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_kubectl_kustomize_builds_valid_objects() -> None:
    built = subprocess.run(
        [str(BIN / "kubectl"), "kustomize", str(ROOT / "deploy/kustomize")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    objects = [obj for obj in yaml.safe_load_all(built.stdout) if obj]
    kinds = {(obj["kind"], obj["metadata"]["name"]) for obj in objects}
    assert ("Namespace", "dataflow-system") in kinds
    assert ("Deployment", "dataflow-operator") in kinds
    assert {
        ("CustomResourceDefinition", f"{p}.dataflow.dev") for p in ("dataflows", "replicas")
    } <= kinds
    for obj in objects:
        kubernetes_validate.validate(obj, "1.30.0", strict=True)
    # the operator's own objects in its namespace (the drivers' account, binding and
    # NetworkPolicy go to every namespace where Replicas run)
    where = {(o["kind"], o["metadata"]["name"]): o["metadata"].get("namespace") for o in objects}
    for key in [
        ("Deployment", "dataflow-operator"),
        ("ServiceAccount", "dataflow-operator"),
        ("Service", "dataflow-operator-metrics"),
        ("NetworkPolicy", "dataflow-operator"),
    ]:
        assert where[key] == "dataflow-system", key
