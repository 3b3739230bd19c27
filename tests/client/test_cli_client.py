"""``dataflow-operator subscribe`` and ``peek``: the console script in a clean environment,
against a real control API on loopback, directly (``--address``) and through a fake
Kubernetes API server's service proxy with a kubeconfig written here."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import ClientSession, web
from tests.runtime.fake_replica import FakeReplica

from dataflow_operator.api.protocol import DesiredDataflows
from dataflow_operator.runtime.serve import ControlServer

pytestmark = pytest.mark.timeout(120)

SCRIPT = str(Path(sys.executable).parent / "dataflow-operator")
TOKEN = "replica-token"
USER_TOKEN = "user-token"


def clean_env(**extra: str) -> dict[str, str]:
    """Like ``env -i PATH=$PATH``: nothing of make's or the test runner's environment."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **extra}


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SCRIPT, *args],
        capture_output=True,
        text=True,
        env=env or clean_env(),
        timeout=60,
        check=False,
    )


@pytest.fixture
def replica(tmp_path: Path) -> FakeReplica:
    fake = FakeReplica(tmp_path / "replica")
    flows = [
        {"name": "s", "spec": {"cluster": "c", "kind": "Subscribe", "sql": "SELECT 1 AS x"}},
        {"name": "i", "spec": {"cluster": "c", "kind": "Index", "sql": "SELECT 1 AS x"}},
    ]
    fake.apply(DesiredDataflows.model_validate({"dataflows": flows}))
    fake.write("s", 0, [("a", 100, 1), ("b", 150, 1)], upper=200)
    fake.write("i", 0, [("k", 100, 2)], upper=200)
    return fake


@pytest.fixture
def server(replica: FakeReplica) -> Iterator[ControlServer]:
    with ControlServer(replica, "127.0.0.1:0", token=TOKEN) as running:
        yield running


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    return path


def subscribe(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    # Ctrl-C as a user's: a shell's background job (how a CI may run the suite) ignores
    # SIGINT, and so would the child; a handled signal is reset to the default on exec.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return subprocess.Popen(
            [SCRIPT, "subscribe", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
    finally:
        signal.signal(signal.SIGINT, previous)


def read_lines(process: subprocess.Popen[str], count: int) -> list[str]:
    assert process.stdout is not None
    return [process.stdout.readline().rstrip("\n") for _ in range(count)]


def interrupt(process: subprocess.Popen[str], signum: int = signal.SIGINT) -> tuple[int, str, str]:
    process.send_signal(signum)
    out, err = process.communicate(timeout=30)
    return process.returncode, out, err


def test_subscribe_direct_prints_snapshot_then_updates_and_ctrl_c_exits_0(
    server: ControlServer, replica: FakeReplica, token_file: Path
) -> None:
    address = f"127.0.0.1:{server.port}"
    process = subscribe(["s", "--address", address, "--token-file", str(token_file)], clean_env())
    assert read_lines(process, 2) == ["199\t1\ta", "199\t1\tb"]
    replica.write("s", 1, [("b", 210, -1), ("c", 220, 1)], upper=300)
    assert read_lines(process, 2) == ["210\t-1\tb", "220\t1\tc"]
    code, out, err = interrupt(process)
    assert (code, out, err) == (0, "", "")

    # resume after 210 without the snapshot: exactly what came after
    process = subscribe(
        [
            "s",
            "--address",
            address,
            "--token-file",
            str(token_file),
            "--as-of",
            "210",
            "--no-snapshot",
        ],
        clean_env(),
    )
    assert read_lines(process, 1) == ["220\t1\tc"]
    assert interrupt(process)[0] == 0


def test_peek_direct_prints_the_rows(server: ControlServer, token_file: Path) -> None:
    done = cli(
        "peek", "i", "--address", f"127.0.0.1:{server.port}", "--token-file", str(token_file)
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "199\t2\tk\n", "")


@pytest.mark.slow
def test_failures_are_one_line_and_exit_1(
    server: ControlServer, token_file: Path, tmp_path: Path
) -> None:
    address = f"127.0.0.1:{server.port}"
    wrong = tmp_path / "wrong"
    wrong.write_text("nope")
    for args, expected in [
        (["subscribe", "s", "--address", address], "answered 401: Unauthorized"),
        (["peek", "i", "--address", address, "--token-file", str(wrong)], "answered 401"),
        (
            ["subscribe", "zz", "--address", address, "--token-file", str(token_file)],
            "answered 404: UnknownDataflow",
        ),
        (
            ["peek", "s", "--address", address, "--token-file", str(token_file)],
            "answered 409: NotAnIndex",
        ),
        (
            ["peek", "i", "--address", "127.0.0.1:9", "--token-file", str(token_file)],
            "cannot reach the control API at 127.0.0.1:9",
        ),
        (
            ["peek", "i", "--address", address, "--token-file", str(tmp_path / "none")],
            "reading the token file",
        ),
    ]:
        done = cli(*args)
        assert done.returncode == 1, (args, done.stderr)
        assert done.stdout == ""
        lines = done.stderr.splitlines()
        assert len(lines) == 1 and expected in lines[0], (args, done.stderr)
        assert lines[0].startswith(f"{args[0]}: ")


# --- through a fake Kubernetes API server ---------------------------------------------


class FakeApiServer:
    """Answers the Dataflow and Secret GETs and proxies ``services/…/proxy/…`` to the
    replica like kube-apiserver: it authenticates the user's bearer token and does not
    pass the Authorization header on."""

    def __init__(self, control: ControlServer, hydrated: list[str]) -> None:
        self.control = control
        self.hydrated = hydrated
        self.requests: list[str] = []
        self.forwarded_headers: list[dict[str, str]] = []
        self.loop = asyncio.new_event_loop()
        self.runner: web.AppRunner | None = None
        self.port = 0

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_get(
            "/apis/dataflow.dev/v1alpha1/namespaces/{ns}/dataflows/{name}", self.dataflow
        )
        app.router.add_get("/api/v1/namespaces/{ns}/secrets/{name}", self.secret)
        app.router.add_get("/api/v1/namespaces/{ns}/services/{service}/proxy/{tail:.*}", self.proxy)
        self.runner = web.AppRunner(app, shutdown_timeout=0.5)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    def start(self) -> FakeApiServer:
        self.loop.run_until_complete(self._start())
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        return self

    async def _stop(self) -> None:
        assert self.runner is not None
        await self.runner.cleanup()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:  # a proxied stream whose client left
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)

    def _authenticated(self, request: web.Request) -> None:
        self.requests.append(request.path_qs)
        if request.headers.get("Authorization") != f"Bearer {USER_TOKEN}":
            raise web.HTTPUnauthorized(text='{"kind":"Status","code":401}')

    async def dataflow(self, request: web.Request) -> web.Response:
        self._authenticated(request)
        ns, name = request.match_info["ns"], request.match_info["name"]
        if name != "s":
            return web.json_response({"kind": "Status", "code": 404}, status=404)
        body: dict[str, Any] = {
            "apiVersion": "dataflow.dev/v1alpha1",
            "kind": "Dataflow",
            "metadata": {
                "name": name,
                "namespace": ns,
                "uid": "u1",
                "generation": 1,
                "creationTimestamp": "2026-01-01T00:00:00Z",
            },
            "spec": {"cluster": "c", "kind": "Subscribe", "sql": "SELECT 1 AS x"},
            "status": {
                "replicas": [{"replica": r, "hydrated": r in self.hydrated} for r in ["r0", "r1"]]
            },
        }
        return web.json_response(body)

    async def secret(self, request: web.Request) -> web.Response:
        self._authenticated(request)
        if request.match_info["name"] != "r1-control-token":
            return web.json_response({"kind": "Status", "code": 404}, status=404)
        encoded = base64.b64encode(TOKEN.encode()).decode()
        return web.json_response({"kind": "Secret", "data": {"token": encoded}})

    async def proxy(self, request: web.Request) -> web.StreamResponse:
        self._authenticated(request)
        if request.match_info["service"] != "r1-driver:control":
            return web.json_response({"kind": "Status", "code": 503}, status=503)
        headers = {
            k: v for k, v in request.headers.items() if k.lower() not in {"authorization", "host"}
        }
        self.forwarded_headers.append(headers)
        url = f"{self.control.url}/{request.match_info['tail']}"
        async with (
            ClientSession() as session,
            session.get(url, params=request.query, headers=headers) as upstream,
        ):
            response = web.StreamResponse(
                status=upstream.status, headers={"Content-Type": upstream.headers["Content-Type"]}
            )
            await response.prepare(request)
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response


def kubeconfig(tmp_path: Path, port: int) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "fake", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "users": [{"name": "me", "user": {"token": USER_TOKEN}}],
                "contexts": [
                    {
                        "name": "ctx",
                        "context": {"cluster": "fake", "user": "me", "namespace": "ns1"},
                    }
                ],
                "current-context": "ctx",
            }
        )
    )
    return path


@pytest.fixture
def api_server(server: ControlServer) -> Iterator[FakeApiServer]:
    fake = FakeApiServer(server, hydrated=["r1"]).start()
    yield fake
    fake.stop()


@pytest.mark.slow
def test_subscribe_and_peek_through_the_service_proxy(
    api_server: FakeApiServer, replica: FakeReplica, tmp_path: Path
) -> None:
    env = clean_env(KUBECONFIG=str(kubeconfig(tmp_path, api_server.port)))
    process = subscribe(["s"], env)
    assert read_lines(process, 2) == ["199\t1\ta", "199\t1\tb"]
    replica.write("s", 1, [("c", 250, 1)], upper=300)
    assert read_lines(process, 1) == ["250\t1\tc"]
    code, _, err = interrupt(process, signal.SIGTERM)  # as a container is stopped
    assert (code, err) == (0, "")

    # the Dataflow's status picked r1 (hydrated), its Secret gave the token, the namespace
    # came from the kubeconfig context, and the token went in the header that survives
    assert api_server.requests[:3] == [
        "/apis/dataflow.dev/v1alpha1/namespaces/ns1/dataflows/s",
        "/api/v1/namespaces/ns1/secrets/r1-control-token",
        "/api/v1/namespaces/ns1/services/r1-driver:control/proxy/dataflows/s/subscribe"
        "?progress=true",  # always asked for: the point to resume from after a restart
    ]
    assert api_server.forwarded_headers[0]["X-Dataflow-Token"] == TOKEN

    done = cli("peek", "i", "-n", "ns1", "--replica", "r1", env=env)
    assert (done.returncode, done.stdout, done.stderr) == (0, "199\t2\tk\n", "")
    assert api_server.requests[-1] == (
        "/api/v1/namespaces/ns1/services/r1-driver:control/proxy/dataflows/i/peek?format=lines"
    )


@pytest.mark.slow
def test_service_proxy_failures_name_what_failed(server: ControlServer, tmp_path: Path) -> None:
    fake = FakeApiServer(server, hydrated=[]).start()
    try:
        env = clean_env(KUBECONFIG=str(kubeconfig(tmp_path, fake.port)))
        done = cli("subscribe", "s", env=env)
        assert done.returncode == 1
        assert (
            done.stderr
            == "subscribe: no replica reports Dataflow ns1/s hydrated yet; name one with --replica\n"
        )
        done = cli("peek", "gone", env=env)
        assert (done.returncode, done.stderr) == (1, "peek: Dataflow ns1/gone not found\n")
        # a Replica without a token Secret is asked without a token: the replica refuses
        done = cli("peek", "i", "--replica", "r0", env=env)
        assert done.returncode == 1 and "503" in done.stderr
    finally:
        fake.stop()
    done = cli("peek", "i", env=clean_env(KUBECONFIG=str(tmp_path / "missing")))
    assert done.returncode == 1 and done.stderr.startswith("peek: loading the kubeconfig")


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _replica_with(root: Path, batches: list[tuple[list[tuple[str, int, int]], int]]) -> FakeReplica:
    fake = FakeReplica(root)
    flows = [{"name": "s", "spec": {"cluster": "c", "kind": "Subscribe", "sql": "SELECT 1 AS x"}}]
    fake.apply(DesiredDataflows.model_validate({"dataflows": flows}))
    for batch, (updates, upper) in enumerate(batches):
        fake.write("s", batch, updates, upper=upper)
    return fake


def test_subscribe_resumes_on_the_next_driver_after_a_restart(
    tmp_path: Path, token_file: Path
) -> None:
    """The driver shuts down (an expiration restart, a cutover); its successor at the same
    address serves the same times: the stream goes on after the last complete time."""
    port = _free_port()
    history = [([("a", 100, 1), ("b", 150, 1)], 200), ([("b", 210, -1)], 300)]
    first = _replica_with(tmp_path / "first", history)
    args = ["s", "--address", f"127.0.0.1:{port}", "--token-file", str(token_file)]
    with ControlServer(first, f"127.0.0.1:{port}", token=TOKEN):
        process = subscribe([*args, "--reconnect-timeout", "30s"], clean_env())
        assert read_lines(process, 1) == ["299\t1\ta"]  # the contents at 299 (b retracted)
    # stopped: the stream ended with '#end ShuttingDown 299'
    # the successor computed the same history, and more after it
    second = _replica_with(tmp_path / "second", [*history, ([("c", 320, 1)], 400)])
    with ControlServer(second, f"127.0.0.1:{port}", token=TOKEN):
        assert read_lines(process, 1) == ["320\t1\tc"]  # nothing before 299 again
        second.write("s", 3, [("a", 410, -1)], upper=500)
        assert read_lines(process, 1) == ["410\t-1\ta"]
        code, out, err = interrupt(process)
    assert (code, out) == (0, "")
    assert "ShuttingDown" in err and "resuming after 299" in err


def test_subscribe_without_reconnecting_ends_with_the_reason(
    tmp_path: Path, token_file: Path
) -> None:
    port = _free_port()
    fake = _replica_with(tmp_path / "r", [([("a", 100, 1)], 200)])
    args = ["s", "--address", f"127.0.0.1:{port}", "--token-file", str(token_file)]
    with ControlServer(fake, f"127.0.0.1:{port}", token=TOKEN):
        process = subscribe([*args, "--reconnect-timeout", "0"], clean_env())
        assert read_lines(process, 1) == ["199\t1\ta"]
    out, err = process.communicate(timeout=30)
    assert process.returncode == 1 and out == ""
    assert err.startswith("subscribe: the replica ended the stream: ShuttingDown")


@pytest.mark.parametrize("command", ["peek", "subscribe"])
def test_without_a_kubeconfig_the_line_suggests_address(command: str, tmp_path: Path) -> None:
    done = cli(command, "d1", env=clean_env(HOME=str(tmp_path)))
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"{command}: loading the kubeconfig: ")
    assert "reach the replica's control API directly with --address HOST:PORT" in line
