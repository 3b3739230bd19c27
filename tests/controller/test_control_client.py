"""The operator's client of the replicas' control API, against a small server."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from aiohttp import web

from dataflow_operator.api.protocol import ReleaseFrontiers, ReplicaPhase
from dataflow_operator.controller.control_client import TOKEN_HEADER, ControlClient, ControlError

pytestmark = pytest.mark.asyncio


async def _status(request: web.Request) -> web.Response:
    if request.headers.get(TOKEN_HEADER) != "secret":
        return web.json_response({"error": "Unauthorized", "message": "no token"}, status=401)
    report = {"startTime": 5, "phase": "Running", "dataflows": [{"name": "d", "frontier": [7]}]}
    return web.json_response(report)


async def _release(request: web.Request) -> web.Response:
    return web.json_response(await request.json())


def _answering(status: int, text: str) -> web.RequestHandler:
    async def handler(_: web.Request) -> web.Response:
        return web.Response(status=status, text=text, content_type="application/json")

    return handler


@pytest_asyncio.fixture
async def address() -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_get("/ok/status", _status)
    app.router.add_put("/ok/release", _release)
    app.router.add_get("/crash/status", _answering(500, "Traceback: boom"))
    app.router.add_get("/garbled/status", _answering(200, '{"startTime": '))
    app.router.add_get("/other/status", _answering(200, '{"version": "v2"}'))
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


async def test_a_report_is_parsed_and_frontiers_are_echoed(address: str) -> None:
    client = ControlClient()
    try:
        report = await client.status(f"{address}/ok", token="secret")
        assert report.phase is ReplicaPhase.RUNNING
        assert [(d.name, d.frontier) for d in report.dataflows] == [("d", [7])]
        await client.put_release(f"{address}/ok", ReleaseFrontiers(), token="secret")
    finally:
        await client.close()


@pytest.mark.parametrize(
    ("path", "reason", "status", "says"),
    [
        ("ok", "Unauthorized", 401, "no token"),  # the replica's own reason and message
        ("crash", "HTTP500", 500, "Traceback: boom"),  # not the protocol's error body
        ("garbled", "BadResponse", None, "Invalid JSON"),
        ("other", "BadResponse", None, "v1"),  # another protocol version
        ("nobody", "HTTP404", 404, ""),
    ],
)
async def test_each_failure_is_one_control_error_with_its_reason(
    address: str, path: str, reason: str, status: int | None, says: str
) -> None:
    client = ControlClient()
    try:
        with pytest.raises(ControlError) as raised:
            await client.status(f"{address}/{path}")
        assert (raised.value.reason, raised.value.status) == (reason, status)
        assert says in raised.value.message
    finally:
        await client.close()


async def test_a_replica_that_does_not_answer_is_unreachable() -> None:
    client = ControlClient(timeout_seconds=1)
    try:
        with pytest.raises(ControlError) as raised:
            await client.status("http://127.0.0.1:9")  # discard port: nothing listens
        assert raised.value.reason == "Unreachable"
    finally:
        await client.close()
