"""What a fresh cluster gets before the operator runs: CRDs, the chart's RBAC, namespaces.

The CRDs are the project's ``crds/``; the ServiceAccounts, ClusterRoles and bindings are
the Helm chart's own, rendered with ``helm template`` and applied with ``kubectl``, so
the operator and its drivers run with exactly the rights the chart grants. What the
controller-manager would add to each namespace (the ``default`` ServiceAccount and the
``kube-root-ca.crt`` ConfigMap) is added here.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.envtest.control_plane import ADMIN_TOKEN, ControlPlane

__all__ = [
    "CHART_NAMESPACE",
    "OPERATOR_ACCOUNT",
    "REPLICA_ACCOUNT",
    "bootstrap",
    "kubectl",
    "namespace_objects",
    "write_kubeconfig",
]

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / ".venv" / "bin"
CHART = ROOT / "charts" / "dataflow-operator"
RELEASE = "dataflow-operator"
CHART_NAMESPACE = "dataflow-system"
OPERATOR_ACCOUNT = RELEASE
"""The chart's ServiceAccount of the operator (its fullname)."""
REPLICA_ACCOUNT = "dataflow-replica"
"""The chart's ServiceAccount of Replica drivers (``replicas.serviceAccount.name``)."""
RBAC_KINDS = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}


def write_kubeconfig(path: Path, server: str, token: str, ca_file: Path) -> Path:
    """A kubeconfig for ``server`` with a bearer token, verified against ``ca_file``."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "envtest",
                "cluster": {"server": server, "certificate-authority": str(ca_file)},
            }
        ],
        "users": [{"name": "user", "user": {"token": token}}],
        "contexts": [
            {
                "name": "envtest",
                "context": {"cluster": "envtest", "user": "user", "namespace": "default"},
            }
        ],
        "current-context": "envtest",
    }
    path.write_text(yaml.safe_dump(config))
    return path


def kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> str:
    """Run ``kubectl`` with ``kubeconfig``; its output, or an error naming the command."""
    done = subprocess.run(
        [str(BIN / "kubectl"), "--kubeconfig", str(kubeconfig), *args],
        check=False,
        input=stdin,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(kubeconfig.parent)},
        timeout=120,
    )
    if done.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def chart_rbac(workdir: Path, replica_namespaces: list[str]) -> list[dict[str, Any]]:
    """The chart's ServiceAccounts, roles and bindings (``helm template``)."""
    helm_home = workdir / "helm"
    env = {
        "PATH": "/usr/bin:/bin",
        "HELM_CACHE_HOME": str(helm_home / "cache"),
        "HELM_CONFIG_HOME": str(helm_home / "config"),
        "HELM_DATA_HOME": str(helm_home / "data"),
    }
    rendered = subprocess.run(
        [
            str(BIN / "helm"), "template", RELEASE, str(CHART), "--namespace", CHART_NAMESPACE,
            "--set", f"replicaNamespaces={{{','.join(replica_namespaces)}}}",
        ],
        capture_output=True, text=True, env=env, check=True, timeout=60,
    ).stdout  # fmt: skip
    documents = [d for d in yaml.safe_load_all(rendered) if d]
    return [d for d in documents if d["kind"] in RBAC_KINDS]


def namespace_objects(namespace: str, ca_pem: str) -> list[dict[str, Any]]:
    """A namespace as the controller-manager leaves it: default account, root CA map."""
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "default", "namespace": namespace},
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "kube-root-ca.crt", "namespace": namespace},
            "data": {"ca.crt": ca_pem},
        },
    ]


def bootstrap(plane: ControlPlane, workdir: Path, namespaces: list[str]) -> Path:
    """CRDs, namespaces and the chart's RBAC; returns the admin kubeconfig."""
    admin = write_kubeconfig(workdir / "admin.kubeconfig", plane.url, ADMIN_TOKEN, plane.ca_file)
    kubectl(admin, "apply", "-f", str(ROOT / "crds"))
    ca_pem = plane.ca_file.read_text()
    objects = [o for ns in [CHART_NAMESPACE, *namespaces] for o in namespace_objects(ns, ca_pem)]
    objects += chart_rbac(workdir, namespaces)
    listing = {"apiVersion": "v1", "kind": "List", "items": objects}
    kubectl(admin, "apply", "-f", "-", stdin=yaml.safe_dump(listing))
    kubectl(admin, "wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    return admin
