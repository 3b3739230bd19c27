"""Render ``deploy/kustomize/``: a kustomize base of the Helm chart's default install.

For users of neither Helm nor Argo CD: ``kubectl apply -k deploy/kustomize`` installs
the CRDs, the operator (namespace ``dataflow-system``, release name
``dataflow-operator``) and its RBAC, as ``helm template`` renders them with the chart's
defaults. Overlays change the rest (image, namespace list, replicas).

    python tools/render_kustomize.py [BIN]          # write it (BIN holds helm; .venv/bin)
    python tools/render_kustomize.py [BIN] --check  # exit 1 if it is out of date
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "charts/dataflow-operator"
TARGET = ROOT / "deploy/kustomize"
NAMESPACE = "dataflow-system"
RELEASE = "dataflow-operator"
GENERATED = "# Generated from charts/dataflow-operator by make kustomize: do not edit.\n"
KUSTOMIZATION = f"""{GENERATED}apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - namespace.yaml
  - dataflow-operator.yaml
"""
NAMESPACE_YAML = f"""{GENERATED}apiVersion: v1
kind: Namespace
metadata:
  name: {NAMESPACE}
"""


def render(helm: Path) -> dict[str, str]:
    """File name → text of the base."""
    with tempfile.TemporaryDirectory() as home:
        env = {
            **os.environ,
            "HELM_CACHE_HOME": f"{home}/cache",
            "HELM_CONFIG_HOME": f"{home}/config",
            "HELM_DATA_HOME": f"{home}/data",
        }
        manifests = subprocess.run(
            [
                str(helm),
                "template",
                RELEASE,
                str(CHART),
                "--namespace",
                NAMESPACE,
                "--include-crds",
            ],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        ).stdout
    return {
        "kustomization.yaml": KUSTOMIZATION,
        "namespace.yaml": NAMESPACE_YAML,
        "dataflow-operator.yaml": GENERATED + manifests,
    }


def main() -> int:
    """Write the base, or with ``--check`` report whether it is current."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bin", nargs="?", type=Path, default=ROOT / ".venv/bin")
    parser.add_argument("--check", action="store_true", help="fail if the files are stale")
    args = parser.parse_args()
    files = render(args.bin / "helm")
    stale = [
        name
        for name, text in files.items()
        if not (TARGET / name).exists() or (TARGET / name).read_text(encoding="utf-8") != text
    ]
    if args.check:
        for name in stale:
            print(f"deploy/kustomize/{name} is stale: run make kustomize", file=sys.stderr)
        return 1 if stale else 0
    TARGET.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (TARGET / name).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
