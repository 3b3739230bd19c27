"""A make-before-break expiration restart on a real cluster, through the Helm-installed
operator: the driver Service moves from one pod to its hydrated successor, never to none.

What the emulator cannot show is real here: the operator reaching each attempt by its
pod IP, the Service's endpoints following its selector, and the successor's own DNS name
under the attempts Service.
"""

from __future__ import annotations

import json
from typing import Any

from e2e.conftest import run, tool
from e2e.test_examples_on_kind import condition, get, kubectl, wait_for

MANIFESTS = """
apiVersion: v1
kind: ConfigMap
metadata: {name: handover-feed}
data:
  000001.json: '{"v": "a", "time": 1767225600000, "diff": 1}'
---
apiVersion: dataflow.dev/v1alpha1
kind: Replica
metadata: {name: mbb}
spec:
  cluster: mbb
  expirationOffset: 150s
  executor: {instances: 0}
  driver: {cores: 1, memory: 768Mi}
  volumes: [{name: feed, configMap: {name: handover-feed}}]
  volumeMounts: [{name: feed, mountPath: /opt/inputs/feed}]
---
apiVersion: dataflow.dev/v1alpha1
kind: Dataflow
metadata: {name: mbb-index}
spec:
  cluster: mbb
  kind: Index
  sources:
    - name: feed
      changelog: {path: /opt/inputs/feed, format: json, schema: "v STRING"}
  sql: SELECT v FROM feed
"""


def _endpoint_ips(context: str, service: str) -> list[str]:
    """The addresses behind a Service, from its EndpointSlices."""
    slices = json.loads(
        kubectl(
            context, "get", "endpointslices", "-l", f"kubernetes.io/service-name={service}",
            "-o", "json",
        )
    )  # fmt: skip
    return sorted(
        address
        for item in slices["items"]
        for endpoint in item.get("endpoints") or []
        for address in endpoint.get("addresses") or []
    )


def _pod_ip(context: str, pod: str) -> str:
    return str(get(context, "pod", pod)["status"]["podIP"])


def test_a_handover_moves_the_service_to_the_hydrated_successor(kind_cluster: str) -> None:
    run(tool("kubectl"), "--context", kind_cluster, "apply", "-f", "-", stdin=MANIFESTS)
    wait_for(
        "Dataflow mbb-index Hydrated",
        lambda: condition(get(kind_cluster, "dataflow", "mbb-index"), "Hydrated") == "True",
    )
    replica = get(kind_cluster, "replica", "mbb")
    assert replica["status"]["restartStrategy"] == "MakeBeforeBreak"
    assert replica["status"]["plannedCutoverAt"]
    assert _endpoint_ips(kind_cluster, "mbb-driver") == [_pod_ip(kind_cluster, "mbb-driver-1")]
    seen: list[list[str]] = []

    def cut_over() -> bool:
        seen.append(_endpoint_ips(kind_cluster, "mbb-driver"))
        status: dict[str, Any] = get(kind_cluster, "replica", "mbb")["status"]
        return status.get("attempt") == 2 and bool(status.get("lastHandover"))

    wait_for("the cutover to mbb-driver-2", cut_over, timeout=420)
    status = get(kind_cluster, "replica", "mbb")["status"]
    assert status["lastHandover"]["outcome"] == "CutOver", status["lastHandover"]
    assert all(seen), seen  # the Service never pointed at nothing
    service = get(kind_cluster, "service", "mbb-driver")
    assert service["spec"]["selector"]["dataflow.dev/attempt"] == "2"
    assert _endpoint_ips(kind_cluster, "mbb-driver") == [_pod_ip(kind_cluster, "mbb-driver-2")]

    def predecessor_gone() -> bool:
        pods = json.loads(
            kubectl(kind_cluster, "get", "pods", "-l", "dataflow.dev/replica=mbb", "-o", "json")
        )
        return [p["metadata"]["name"] for p in pods["items"]] == ["mbb-driver-2"]

    wait_for("mbb-driver-1 to go", predecessor_gone, timeout=180)
    dataflow = get(kind_cluster, "dataflow", "mbb-index")
    (entry,) = dataflow["status"]["replicas"]
    assert entry["hydrated"] is True
    # the successor's own name resolves under the attempts Service (its executors use it)
    kubectl(
        kind_cluster, "exec", "mbb-driver-2", "--", "python", "-c",
        "import socket; socket.gethostbyname('driver-2.mbb-attempts')",
    )  # fmt: skip
    kubectl(kind_cluster, "delete", "dataflow", "mbb-index", "--wait=true", "--timeout=120s")
    kubectl(kind_cluster, "delete", "replica", "mbb", "--wait=true", "--timeout=120s")
    kubectl(kind_cluster, "delete", "configmap", "handover-feed")
