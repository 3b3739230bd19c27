"""The operator's API client: TLS from kubeconfig data, leaving no key file behind."""

from __future__ import annotations

import base64
import subprocess
import tempfile
from pathlib import Path

import kopf

from dataflow_operator.controller.kube import _ssl_context


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


def _leftovers() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("dataflow-operator-*")}


def test_credentials_given_as_data_are_loaded_and_no_file_remains(tmp_path: Path) -> None:
    cert, key = _certificate(tmp_path)
    before = _leftovers()
    info = kopf.ConnectionInfo(
        server="https://127.0.0.1:6443",
        ca_data=base64.b64encode(cert).decode(),
        certificate_data=base64.b64encode(cert).decode(),
        private_key_data=base64.b64encode(key).decode(),
    )
    context = _ssl_context(info)
    assert not isinstance(context, bool)
    assert context.cert_store_stats()["x509_ca"] == 1  # the CA, from memory
    assert _leftovers() == before


def test_plain_http_and_insecure_servers_need_no_context() -> None:
    assert _ssl_context(kopf.ConnectionInfo(server="http://127.0.0.1:8080")) is False
    insecure = kopf.ConnectionInfo(server="https://127.0.0.1:6443", insecure=True)
    assert _ssl_context(insecure) is False
