"""Where the API server's binaries are found: a checkout outside the shared layout still
finds the ones the shared install unpacked, and a folder missing one binary is no answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.envtest import control_plane
from tests.envtest.control_plane import find_assets


def _unpack(folder: Path, *names: str) -> Path:
    folder.mkdir(parents=True)
    for name in names:
        (folder / name).write_text("#!/bin/sh\n")
        (folder / name).chmod(0o755)
    return folder


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkout with no ``../shared`` beside it, no ``KUBEBUILDER_ASSETS``, a home of its own."""
    monkeypatch.setattr(control_plane, "SHARED_INSTALL", tmp_path / "no-shared" / "install")
    monkeypatch.delenv("KUBEBUILDER_ASSETS", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def test_the_variable_wins(elsewhere: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _unpack(elsewhere / ".cache" / "dataflow-envtest", "etcd", "kube-apiserver")
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(elsewhere / "given"))
    assert find_assets() == elsewhere / "given"


def test_finds_what_the_shared_install_unpacked(elsewhere: Path) -> None:
    unpacked = _unpack(elsewhere / ".cache" / "dataflow-envtest", "etcd", "kube-apiserver")
    assert find_assets() == unpacked


def test_finds_setup_envtests_store(elsewhere: Path) -> None:
    store = elsewhere / ".local" / "share" / "kubebuilder-envtest" / "k8s"
    _unpack(store / "1.24.0-linux-amd64", "etcd", "kube-apiserver")
    newer = _unpack(store / "1.31.0-linux-amd64", "etcd", "kube-apiserver")
    assert find_assets() == newer


def test_a_folder_missing_a_binary_is_no_answer(elsewhere: Path) -> None:
    _unpack(elsewhere / ".cache" / "dataflow-envtest", "etcd")
    assert find_assets() is None
