"""A kafka source against a real broker: Kafka (KRaft, one node) runs in the kind cluster.

Records are produced into a two-partition topic; a Subscribe dataflow over it prints
them (``dataflow-operator subscribe``); its consumer group's committed offsets reach the
end of the topic (the usual ``kafka-consumer-groups.sh --describe`` shows no lag); the
driver pod is deleted, the replica comes back on its claim, one more record is produced,
and the dataflow prints it with each earlier record still counted once; the group's
offsets follow.

The e2e workflow loads :data:`KAFKA_IMAGE` into the kind cluster beforehand.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import threading
from collections import Counter

import yaml

from e2e.conftest import ROOT, run, tool
from e2e.test_examples_on_kind import condition, get, kubectl, wait_for

KAFKA_IMAGE = "apache/kafka:3.9.0"
NAMESPACE = "default"
REPLICA, DATAFLOW, TOPIC, GROUP = "rk", "clicks-feed", "clicks", "dataflow-e2e-clicks"
BOOTSTRAP = "kafka.kafka.svc:9092"

KAFKA = f"""\
apiVersion: v1
kind: Namespace
metadata: {{name: kafka}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: kafka, namespace: kafka}}
spec:
  selector: {{matchLabels: {{app: kafka}}}}
  template:
    metadata: {{labels: {{app: kafka}}}}
    spec:
      enableServiceLinks: false   # KAFKA_PORT=tcp://… would be read as broker config
      containers:
        - name: kafka
          image: {KAFKA_IMAGE}
          imagePullPolicy: IfNotPresent
          env:
            - {{name: KAFKA_NODE_ID, value: "1"}}
            - {{name: KAFKA_PROCESS_ROLES, value: "broker,controller"}}
            - {{name: KAFKA_LISTENERS, value: "PLAINTEXT://:9092,CONTROLLER://:9093"}}
            - {{name: KAFKA_ADVERTISED_LISTENERS, value: "PLAINTEXT://{BOOTSTRAP}"}}
            - {{name: KAFKA_CONTROLLER_LISTENER_NAMES, value: CONTROLLER}}
            - {{name: KAFKA_LISTENER_SECURITY_PROTOCOL_MAP, value: "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"}}
            - {{name: KAFKA_CONTROLLER_QUORUM_VOTERS, value: "1@localhost:9093"}}
            - {{name: KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR, value: "1"}}
            - {{name: KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR, value: "1"}}
            - {{name: KAFKA_TRANSACTION_STATE_LOG_MIN_ISR, value: "1"}}
            - {{name: KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS, value: "0"}}
          ports: [{{containerPort: 9092}}]
          readinessProbe: {{tcpSocket: {{port: 9092}}, periodSeconds: 3}}
---
apiVersion: v1
kind: Service
metadata: {{name: kafka, namespace: kafka}}
spec:
  selector: {{app: kafka}}
  ports: [{{port: 9092, targetPort: 9092}}]
"""


def kafka_tool(context: str, script: str, *args: str, stdin: str | None = None) -> str:
    """Run one of the broker image's scripts in the broker's pod."""
    command = [tool("kubectl"), "--context", context, "-n", "kafka", "exec"]
    command += ["-i"] if stdin is not None else []
    command += ["deploy/kafka", "--", f"/opt/kafka/bin/{script}"]
    command += ["--bootstrap-server", "localhost:9092", *args]
    return run(*command, stdin=stdin).stdout


def produce(context: str, *urls: str) -> None:
    """One record per url, keyed by it (so both partitions get some)."""
    lines = "".join(f"{url}|{json.dumps({'url': url})}\n" for url in urls)
    kafka_tool(
        context,
        "kafka-console-producer.sh",
        "--topic",
        TOPIC,
        "--property",
        "parse.key=true",
        "--property",
        "key.separator=|",
        stdin=lines,
    )


def group_offsets(context: str) -> dict[int, tuple[int, int]]:
    """The group's committed offset and the log end, per partition (``--describe``)."""
    described = run(
        tool("kubectl"),
        "--context",
        context,
        "-n",
        "kafka",
        "exec",
        "deploy/kafka",
        "--",
        "/opt/kafka/bin/kafka-consumer-groups.sh",
        "--bootstrap-server",
        "localhost:9092",
        "--describe",
        "--group",
        GROUP,
        check=False,
    ).stdout
    found = {}
    for line in described.splitlines():
        cells = line.split()
        if len(cells) >= 5 and cells[1] == TOPIC and cells[3].isdigit():
            found[int(cells[2])] = (int(cells[3]), int(cells[4]))
    return found


def manifests() -> str:
    replica = {
        "apiVersion": "dataflow.dev/v1alpha1",
        "kind": "Replica",
        "metadata": {"name": REPLICA, "namespace": NAMESPACE},
        "spec": {
            "cluster": "streams",
            "executor": {"instances": 0},
            "storage": {"size": "1Gi"},
        },
    }
    dataflow = {
        "apiVersion": "dataflow.dev/v1alpha1",
        "kind": "Dataflow",
        "metadata": {"name": DATAFLOW, "namespace": NAMESPACE},
        "spec": {
            "cluster": "streams",
            "kind": "Subscribe",
            "sources": [
                {
                    "name": "clicks",
                    "kafka": {
                        "bootstrapServers": BOOTSTRAP,
                        "topic": TOPIC,
                        "schema": "url STRING",
                        "groupId": GROUP,
                    },
                }
            ],
            "sql": "SELECT url FROM clicks",
        },
    }
    return yaml.safe_dump_all([replica, dataflow])


def subscribe_until(context: str, needle: str, timeout: float = 300) -> list[list[str]]:
    """``dataflow-operator subscribe`` as a user runs it: its lines (split on tabs) up to
    the one that inserts ``needle``."""
    command = [str(ROOT / ".venv/bin/dataflow-operator"), "subscribe", DATAFLOW, "-n", NAMESPACE]
    kubectl(context, "config", "use-context", context)
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, text=True)
        timer = threading.Timer(timeout, process.kill)
        timer.start()
        lines: list[list[str]] = []
        try:
            assert process.stdout is not None
            for line in process.stdout:
                lines.append(line.rstrip("\n").split("\t"))
                if lines[-1][1:] == ["1", needle]:
                    return lines
        finally:
            timer.cancel()
            process.kill()
            process.wait()
        errors.seek(0)
        stderr = errors.read().decode(errors="replace")[-4000:]
    raise AssertionError(f"subscribe never printed +1 {needle!r}; stdout: {lines}\n{stderr}")


def counted(lines: list[list[str]]) -> Counter[str]:
    """Each url's multiplicity over the lines."""
    total: Counter[str] = Counter()
    for line in lines:
        if len(line) == 3 and not line[0].startswith("#"):
            total[line[2]] += int(line[1])
    return total


def committed_everything(context: str) -> bool:
    offsets = group_offsets(context)
    return bool(offsets) and all(current == end for current, end in offsets.values())


def test_a_kafka_source_reads_commits_its_group_and_resumes_after_a_restart(
    kind_cluster: str,
) -> None:
    run(tool("kubectl"), "--context", kind_cluster, "apply", "-f", "-", stdin=KAFKA)
    kubectl(kind_cluster, "-n", "kafka", "rollout", "status", "deployment/kafka", "--timeout=300s")
    kafka_tool(kind_cluster, "kafka-topics.sh", "--create", "--topic", TOPIC, "--partitions", "2")
    produce(kind_cluster, "/a", "/b", "/c")

    run(tool("kubectl"), "--context", kind_cluster, "apply", "-f", "-", stdin=manifests())
    wait_for(
        f"Replica {REPLICA} Ready",
        lambda: condition(get(kind_cluster, "replica", REPLICA), "Ready") == "True",
    )
    wait_for(
        f"Dataflow {DATAFLOW} Hydrated",
        lambda: condition(get(kind_cluster, "dataflow", DATAFLOW), "Hydrated") == "True",
    )
    lines = subscribe_until(kind_cluster, "/c")
    assert counted(lines) == Counter({"/a": 1, "/b": 1, "/c": 1})
    wait_for(
        "the group committed at the end of the topic", lambda: committed_everything(kind_cluster)
    )
    assert sum(current for current, _ in group_offsets(kind_cluster).values()) == 3
    (entry,) = get(kind_cluster, "dataflow", DATAFLOW)["status"]["replicas"]
    (source,) = entry["sources"]
    assert sum(source["committedOffsets"].values()) == 3

    driver = get(kind_cluster, "replica", REPLICA)["status"]["driverPod"]
    kubectl(kind_cluster, "delete", "pod", driver, "--wait=true", "--timeout=120s")
    wait_for(
        f"Replica {REPLICA} Ready on a new driver",
        lambda: (
            (replica := get(kind_cluster, "replica", REPLICA))["status"].get("driverPod") != driver
            and condition(replica, "Ready") == "True"
        ),
    )
    produce(kind_cluster, "/d")
    lines = subscribe_until(kind_cluster, "/d")
    assert counted(lines) == Counter({"/a": 1, "/b": 1, "/c": 1, "/d": 1})  # nothing twice
    wait_for("the group committed the new record", lambda: committed_everything(kind_cluster))
    assert sum(current for current, _ in group_offsets(kind_cluster).values()) == 4

    kubectl(kind_cluster, "delete", "dataflow", DATAFLOW, "--wait=true", "--timeout=120s")
    kubectl(kind_cluster, "delete", "replica", REPLICA, "--wait=true", "--timeout=120s")
