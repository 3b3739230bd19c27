"""Fixtures of the operator's tests, on the emulator and on a real API server alike (a
pytest plugin: ``tests/conftest.py`` names it)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import pytest_asyncio

from tests.controller.harness import FakeReplica


@pytest_asyncio.fixture()
async def fake_replica() -> AsyncIterator[FakeReplica]:
    """A stand-in replica: the control API with the real protocol, on a free port."""
    replica = FakeReplica()
    await replica.start()
    yield replica
    await replica.stop()


@pytest.fixture()
def operator_log(tmp_path: Path) -> Callable[[], str]:
    """What the operator started by the test logged so far (its log in ``tmp_path``)."""
    log = tmp_path / "operator.log"
    return lambda: log.read_text() if log.exists() else ""
