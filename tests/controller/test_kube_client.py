"""The operator's API client: client keys from a kubeconfig live in a private directory
until close; the environment's proxy is resolved once; missing or broken credentials name
the kubeconfig."""

from __future__ import annotations

import base64
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml

from dataflow_operator.controller.kube import KubeApi


def _certificate(directory: Path) -> tuple[bytes, bytes]:
    key, cert = directory / "k.pem", directory / "c.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-subj", "/CN=test", "-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
    )
    return cert.read_bytes(), key.read_bytes()


@pytest.fixture(autouse=True)
def _private_temp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Key directories go to this test's own temp dir: other processes of the suite
    (operators under test) make their own in the shared one meanwhile."""
    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private))


def _key_directories() -> set[Path]:
    return set(Path(tempfile.gettempdir()).glob("dataflow-operator-*"))


def _kubeconfig(path: Path, server: str, **user: str) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server, **user.pop("ca", {})}}],
                "users": [{"name": "u", "user": user}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return path


@pytest.mark.asyncio
async def test_client_keys_given_as_data_live_in_a_private_directory_until_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = _certificate(tmp_path)
    encoded = {
        "client-certificate-data": base64.b64encode(cert).decode(),
        "client-key-data": base64.b64encode(key).decode(),
    }
    kubeconfig = _kubeconfig(
        tmp_path / "kubeconfig",
        "https://127.0.0.1:6443",
        ca={"certificate-authority-data": base64.b64encode(cert).decode()},  # type: ignore[arg-type]
        **encoded,
    )
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    before = _key_directories()
    api = await KubeApi.connect()
    try:
        assert api.server == "https://127.0.0.1:6443"
        (directory,) = _key_directories() - before
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
        written = {p.read_bytes() for p in directory.iterdir()}
        assert key in written and cert in written
    finally:
        await api.close()
    assert _key_directories() == before
    # A second login with the same keys writes them again (nothing points at removed files).
    again = await KubeApi.connect()
    try:
        (directory,) = _key_directories() - before
        assert all(p.exists() for p in directory.iterdir())
        assert key in {p.read_bytes() for p in directory.iterdir()}
    finally:
        await again.close()


@pytest.mark.asyncio
async def test_a_plain_http_server_needs_no_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(_kubeconfig(tmp_path / "k", "http://127.0.0.1:8080")))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    before = _key_directories()
    api = await KubeApi.connect()
    try:
        assert api.server == "http://127.0.0.1:8080"
        assert not [p for d in _key_directories() - before for p in d.iterdir()]
    finally:
        await api.close()
    assert _key_directories() == before


def test_the_environment_proxy_is_resolved_once_for_the_api_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dataflow_operator.controller.kube import _environment_proxy

    for variable in ("HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(variable, raising=False)
    assert _environment_proxy("https://api.example:6443") is None
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    assert _environment_proxy("https://api.example:6443") == "http://proxy.example:3128"
    monkeypatch.setenv("NO_PROXY", "api.example")
    assert _environment_proxy("https://api.example:6443") is None


@pytest.mark.asyncio
async def test_missing_or_broken_credentials_say_which_kubeconfig(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kopf

    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    with pytest.raises(kopf.PermanentError, match=r"no kubeconfig at .*absent \(set KUBECONFIG\)"):
        await KubeApi.connect()
    broken = tmp_path / "broken"
    broken.write_text("just a string\n")
    monkeypatch.setenv("KUBECONFIG", str(broken))
    before = _key_directories()
    with pytest.raises(kopf.PermanentError, match=r"the kubeconfig .*broken cannot be used"):
        await KubeApi.connect()
    assert _key_directories() == before
