"""The test kubelet itself: a plain pod gets what a node gives it.

One pod of the project's image (``python -c`` as its command) checks from inside: its
environment (``value`` with ``$(VAR)``, ``valueFrom`` of every kind, ``envFrom``, the
image's ENV, nothing of the test's own), its volumes at their mount paths (Secret,
ConfigMap, the service-account token and CA the API server injects, emptyDir, a claim
bound to a hostPath volume), its hostname and names (the ``kubernetes`` Service), the API
server through ``kubernetes.default.svc:443`` as its ServiceAccount, and a port bound
on ``0.0.0.0`` that the test reaches at the pod's IP. Deleting the pod sends SIGTERM,
which it answers by exiting, and the pod is gone.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.envtest.api import Api
from tests.envtest.conftest import IMAGE
from tests.envtest.kubelet import TestKubelet

pytestmark = [pytest.mark.envtest, pytest.mark.asyncio, pytest.mark.timeout(180)]
NS = "/api/v1/namespaces/default"

PROBE = r"""
import json, os, signal, socket, ssl, sys, urllib.request
from http.server import BaseHTTPRequestHandler, HTTPServer
sa = "/var/run/secrets/kubernetes.io/serviceaccount"
token = open(f"{sa}/token").read()
context = ssl.create_default_context(cafile=f"{sa}/ca.crt")
request = urllib.request.Request(
    "https://kubernetes.default.svc/api/v1/namespaces/default/pods",
    headers={"Authorization": f"Bearer {token}"})
try:
    urllib.request.urlopen(request, context=context, timeout=10)
    api = "allowed"
except urllib.error.HTTPError as error:
    api = str(error.code)
with open("/data/shared/from-pod", "w") as out:
    out.write("written in the pod")
report = {
    "env": dict(os.environ),
    "files": {p: open(p).read() for p in ("/etc/config/greeting", "/etc/secret/password",
                                          f"{sa}/namespace")},
    "cwd": os.getcwd(),
    "hostname": socket.gethostname(),
    "kubernetes": socket.gethostbyname("kubernetes.default.svc"),
    "service": socket.gethostbyname("probe-svc.default.svc"),
    "own_name": socket.gethostbyname("probe-0.probe-svc.default.svc"),
    "api": api,
    "scratch": os.access("/scratch", os.W_OK),
}
print("REPORT " + json.dumps(report), flush=True)
signal.signal(signal.SIGTERM, lambda *_: (print("SIGTERM", flush=True), sys.exit(0)))
class Hello(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"hello")
HTTPServer(("0.0.0.0", 8080), Hello).serve_forever()
"""


def _pod(claim: str) -> dict[str, Any]:
    container = {
        "name": "main",
        "image": IMAGE,
        "command": ["python", "-c", PROBE],
        "env": [
            {"name": "GREETING_FILE", "value": "/etc/config/greeting"},
            {"name": "EXPANDED", "value": "at $(GREETING_FILE), $$(NOT) expanded"},
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
            {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "s1", "key": "password"}}},
            {"name": "COLOUR", "valueFrom": {"configMapKeyRef": {"name": "c1", "key": "colour"}}},
            {"name": "LIMIT_MI", "valueFrom": {"resourceFieldRef": {
                "resource": "limits.memory", "divisor": "1Mi"}}},
        ],
        "envFrom": [{"configMapRef": {"name": "c1"}, "prefix": "CM_"}],
        "resources": {"limits": {"memory": "256Mi"}},
        "readinessProbe": {"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 1},
        "volumeMounts": [
            {"name": "config", "mountPath": "/etc/config", "readOnly": True},
            {"name": "secret", "mountPath": "/etc/secret", "readOnly": True},
            {"name": "scratch", "mountPath": "/scratch"},
            {"name": "shared", "mountPath": "/data/shared"},
        ],
    }  # fmt: skip
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "probe", "namespace": "default", "labels": {"app": "probe"}},
        "spec": {
            "restartPolicy": "Never",
            "hostname": "probe-0",
            "subdomain": "probe-svc",
            "terminationGracePeriodSeconds": 20,
            "containers": [container],
            "volumes": [
                {"name": "config", "configMap": {"name": "c1", "items": [
                    {"key": "greeting", "path": "greeting"}]}},
                {"name": "secret", "secret": {"secretName": "s1"}},
                {"name": "scratch", "emptyDir": {}},
                {"name": "shared", "persistentVolumeClaim": {"claimName": claim}},
            ],
        },
    }  # fmt: skip


async def _objects(api: Api, shared: Path) -> None:
    ns = "/api/v1/namespaces/default"
    await api.create(
        f"{ns}/configmaps",
        {"metadata": {"name": "c1"}, "data": {"greeting": "hello", "colour": "blue"}},
    )
    await api.create(
        f"{ns}/secrets", {"metadata": {"name": "s1"}, "stringData": {"password": "s3cret"}}
    )
    await api.create(
        "/api/v1/persistentvolumes",
        {
            "metadata": {"name": "pv-probe"},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteMany"],
                "hostPath": {"path": str(shared)},
            },
        },
    )
    await api.create(f"{ns}/persistentvolumeclaims", {"metadata": {"name": "shared"}, "spec": {
        "accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}},
        "storageClassName": ""}})  # fmt: skip
    await api.create(
        f"{ns}/services",
        {
            "metadata": {"name": "probe-svc"},
            "spec": {
                "clusterIP": "None",
                "publishNotReadyAddresses": True,
                "selector": {"app": "probe"},
                "ports": [{"port": 8080}],
            },
        },
    )
    await api.create(f"{ns}/pods", _pod("shared"))


async def _until(probe: Any, what: str, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := await probe():
            return found
        await asyncio.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


async def test_a_pod_gets_its_environment_volumes_network_and_graceful_deletion(
    admin: Api, kubelet: TestKubelet, tmp_path: Path
) -> None:
    os.environ["KUBECONFIG"] = "/must/not/leak"
    shared = tmp_path / "pv"
    shared.mkdir()
    await _objects(admin, shared)
    path = "/api/v1/namespaces/default/pods/probe"

    async def ready() -> dict[str, Any] | None:
        pod = await admin.get(path)
        conditions = {
            c["type"]: c["status"] for c in (pod or {}).get("status", {}).get("conditions", [])
        }
        return pod if conditions.get("Ready") == "True" else None

    try:
        pod = await _until(ready, "the pod to be Ready", 90)
    except AssertionError:
        raise AssertionError(
            f"{await admin.get(path)}\n{kubelet.output('default', 'probe')}"
        ) from None
    ip = pod["status"]["podIP"]
    assert ip.startswith("10.244.") and pod["spec"]["nodeName"] == kubelet.node
    assert pod["status"]["phase"] == "Running"
    log = kubelet.output("default", "probe")
    report = json.loads(log.split("REPORT ", 1)[1].splitlines()[0])
    env = report["env"]
    assert env["EXPANDED"] == "at /etc/config/greeting, $(NOT) expanded"
    assert (env["POD_IP"], env["POD_NAME"], env["APP"]) == (ip, "probe", "probe")
    assert env["HOME"] == "/opt/dataflow" and env["PATH"].split(":")[0].endswith("/.venv/bin")
    assert (env["PASSWORD"], env["COLOUR"], env["LIMIT_MI"]) == ("s3cret", "blue", "256")
    assert (env["CM_colour"], env["CM_greeting"]) == ("blue", "hello")
    assert env["KUBERNETES_SERVICE_HOST"] == "10.0.0.1" and env["KUBERNETES_SERVICE_PORT"] == "443"
    assert env["JAVA_HOME"] == "/usr/lib/jvm/java-17-openjdk-amd64"  # the Dockerfile's ENV
    assert "KUBECONFIG" not in env and "PYTEST_CURRENT_TEST" not in env
    assert report["files"] == {
        "/etc/config/greeting": "hello",
        "/etc/secret/password": "s3cret",
        "/var/run/secrets/kubernetes.io/serviceaccount/namespace": "default",
    }
    assert report["cwd"] == "/opt/dataflow" and report["hostname"] == "probe-0"
    assert report["kubernetes"] == "10.0.0.1"
    assert report["service"] == ip and report["own_name"] == ip
    assert report["api"] == "403"  # authenticated as default/default, which may not list pods
    assert report["scratch"] is True
    assert (shared / "from-pod").read_text() == "written in the pod"
    assert not Path("/opt/dataflow").exists()  # the image's directories stay in the pod
    port = await kubelet.reach(ip, 8080)
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/") as answer,
    ):
        assert await answer.text() == "hello"
    memory = kubelet.memory["default/probe"]
    assert memory.limit == 256 * 2**20

    await admin.delete(path)
    await _until(lambda: _gone(admin, path), "the pod to be deleted", 30)
    assert "SIGTERM" in kubelet.output("default", "probe")
    assert memory.peak.pss_anon > 0
    print(f"probe pod: peak {memory.peak} of a {memory.limit // 2**20} MiB limit")


async def _gone(api: Api, path: str) -> bool:
    return await api.get(path) is None


def _plain_pod(name: str, image: str, script: str, memory: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{
                "name": "main", "image": image, "command": ["python", "-c", script],
                "resources": {"limits": {"memory": memory}},
            }],
        },
    }  # fmt: skip


async def test_a_pod_over_its_memory_limit_is_oom_killed_and_an_unknown_image_waits(
    admin: Api, kubelet: TestKubelet
) -> None:
    hog = "import time; x = bytearray(400 * 2**20); x[::4096] = b'1' * len(x[::4096]); time.sleep(120)"
    await admin.create(f"{NS}/pods", _plain_pod("hog", IMAGE, hog, "128Mi"))
    await admin.create(f"{NS}/pods", _plain_pod("nope", "nope:1", "pass", "128Mi"))

    async def terminated() -> dict[str, Any] | None:
        pod = await admin.get(f"{NS}/pods/hog")
        state = ((pod or {}).get("status", {}).get("containerStatuses") or [{}])[0].get("state", {})
        return state.get("terminated")

    ended = await _until(terminated, "the hog to be killed", 90)
    assert (ended["reason"], ended["exitCode"]) == ("OOMKilled", 137)
    hog_pod = await admin.get(f"{NS}/pods/hog")
    assert hog_pod is not None and hog_pod["status"]["phase"] == "Failed"
    assert kubelet.memory["default/hog"].peak.pss_anon > 128 * 2**20
    nope = await admin.get(f"{NS}/pods/nope")
    assert nope is not None
    (waiting,) = [c["state"]["waiting"] for c in nope["status"]["containerStatuses"]]
    assert waiting["reason"] == "ErrImagePull" and "nope:1" in waiting["message"]
