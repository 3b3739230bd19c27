"""A replica whose executors do the work, with its state on an object store (MinIO).

MinIO runs in the cluster; the Replica has two executors and ``stateUri: s3a://…`` with
a credentials Secret; the seed's last-30-days dataflow reads a table on the same bucket;
a row is put there, and ``dataflow-operator subscribe`` (through the API server's service
proxy, with the user's kubeconfig) prints it.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime

import yaml

from e2e.conftest import ROOT, run, tool
from e2e.test_examples_on_kind import condition, get, kubectl, wait_for

NAMESPACE = "default"
DATAFLOW = "last-30-days-on-minio"
BUCKET = "dataflow"
USER, PASSWORD = "dataflow", "dataflow-secret"
ENDPOINT = "http://minio.minio.svc:9000"
MINIO_IMAGE = "minio/minio:latest"
MC_IMAGE = "minio/mc:latest"

MINIO = f"""\
apiVersion: v1
kind: Namespace
metadata: {{name: minio}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: minio, namespace: minio}}
spec:
  selector: {{matchLabels: {{app: minio}}}}
  template:
    metadata: {{labels: {{app: minio}}}}
    spec:
      containers:
        - name: minio
          image: {MINIO_IMAGE}
          args: [server, /data]
          env:
            - {{name: MINIO_ROOT_USER, value: {USER}}}
            - {{name: MINIO_ROOT_PASSWORD, value: {PASSWORD}}}
          ports: [{{containerPort: 9000}}]
          readinessProbe: {{httpGet: {{path: /minio/health/ready, port: 9000}}}}
          volumeMounts: [{{name: data, mountPath: /data}}]
      volumes: [{{name: data, emptyDir: {{}}}}]
---
apiVersion: v1
kind: Service
metadata: {{name: minio, namespace: minio}}
spec:
  selector: {{app: minio}}
  ports: [{{port: 9000, targetPort: 9000}}]
"""


def credentials_secret() -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "minio-credentials", "namespace": NAMESPACE},
            "stringData": {
                "AWS_ACCESS_KEY_ID": USER,
                "AWS_SECRET_ACCESS_KEY": PASSWORD,
                "AWS_ENDPOINT_URL": ENDPOINT,
                "AWS_REGION": "us-east-1",
            },
        }
    )


def replica_and_dataflow() -> str:
    """The seed's last-30-days dataflow on a Replica with executors and its state on MinIO."""
    replica = {
        "apiVersion": "dataflow.dev/v1alpha1",
        "kind": "Replica",
        "metadata": {"name": "r2", "namespace": NAMESPACE},
        "spec": {
            "cluster": "analytics",
            "driver": {"cores": 1, "memory": "768Mi"},
            "executor": {"instances": 2, "cores": 1, "memory": "512Mi"},
            "stateUri": f"s3a://{BUCKET}/replicas/r2",
            "stateCredentials": "minio-credentials",
            "sparkConf": {
                "spark.hadoop.fs.s3a.endpoint": ENDPOINT,
                "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
                "spark.hadoop.fs.s3a.path.style.access": "true",
                "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
                "spark.kubernetes.executor.request.cores": "250m",
            },
        },
    }
    seed = (ROOT / "examples/last-30-days.yaml").read_text().split("\n---\n")[1]
    dataflow = yaml.safe_load(seed)
    dataflow["metadata"] = {"name": DATAFLOW, "namespace": NAMESPACE}
    dataflow["spec"]["cluster"] = "analytics"
    (source,) = dataflow["spec"]["sources"]
    source["table"]["path"] = f"s3a://{BUCKET}/tables/events"
    return yaml.safe_dump_all([replica, dataflow])


def mc(context: str, script: str) -> None:
    """Run a MinIO client script in a Job next to MinIO, and wait for it to succeed."""
    name = f"mc-{uuid.uuid4().hex[:6]}"
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "minio"},
        "spec": {
            "backoffLimit": 6,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "mc",
                            "image": MC_IMAGE,
                            "command": ["/bin/sh", "-c"],
                            "args": [
                                f"mc alias set m {ENDPOINT} {USER} {PASSWORD} >/dev/null "
                                f"&& {script}"
                            ],
                        }
                    ],
                }
            },
        },
    }
    run(tool("kubectl"), "--context", context, "apply", "-f", "-", stdin=json.dumps(job))
    kubectl(
        context, "-n", "minio", "wait", "--for=condition=complete", f"job/{name}", "--timeout=300s"
    )


def subscribe_until(context: str, needle: str, timeout: float = 300) -> list[str]:
    """``dataflow-operator subscribe`` as a user runs it; the lines up to one with needle."""
    command = [
        str(ROOT / ".venv/bin/dataflow-operator"),
        "subscribe",
        DATAFLOW,
        "-n",
        NAMESPACE,
    ]
    kubectl(context, "config", "use-context", context)  # the CLI uses the current context
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, text=True)
        timer = threading.Timer(timeout, process.kill)  # a silent stream must not hang
        timer.start()
        lines: list[str] = []
        try:
            assert process.stdout is not None
            for line in process.stdout:
                lines.append(line.rstrip("\n"))
                _, diff, *columns = lines[-1].split("\t")
                if int(diff) == 1 and needle in columns:
                    return lines
        finally:
            timer.cancel()
            process.kill()
            process.wait()
        errors.seek(0)
        stderr = errors.read().decode(errors="replace")[-4000:]
    raise AssertionError(f"subscribe never printed +1 {needle!r}; stdout: {lines}\n{stderr}")


def test_executors_with_state_on_minio_and_subscribe_prints_the_insert(
    kind_cluster: str,
) -> None:
    run(tool("kubectl"), "--context", kind_cluster, "apply", "-f", "-", stdin=MINIO)
    kubectl(kind_cluster, "-n", "minio", "rollout", "status", "deployment/minio", "--timeout=300s")
    mc(kind_cluster, f"mc mb --ignore-existing m/{BUCKET}")
    run(tool("kubectl"), "--context", kind_cluster, "apply", "-f", "-", stdin=credentials_secret())
    run(
        tool("kubectl"),
        "--context",
        kind_cluster,
        "apply",
        "-f",
        "-",
        stdin=replica_and_dataflow(),
    )
    wait_for(
        "Replica r2 Ready",
        lambda: condition(get(kind_cluster, "replica", "r2"), "Ready") == "True",
    )
    executors = json.loads(
        kubectl(
            kind_cluster,
            "get",
            "pods",
            "-l",
            "dataflow.dev/replica=r2,dataflow.dev/role=executor",
            "-o",
            "json",
        )
    )["items"]
    assert len(executors) == 2
    for pod in executors:  # from the operator's template: the Secret as env, owned by Spark
        (container,) = pod["spec"]["containers"]
        assert {"secretRef": {"name": "minio-credentials"}} in container.get("envFrom", [])
        (owner,) = pod["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"]) == ("Pod", "r2-driver-1")
    wait_for(
        f"Dataflow {DATAFLOW} Hydrated",
        lambda: condition(get(kind_cluster, "dataflow", DATAFLOW), "Hydrated") == "True",
    )
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    row = json.dumps({"content": "hello-from-minio", "event_ts": now})
    name = f"{time.time_ns():020d}.json"
    mc(kind_cluster, f"echo '{row}' | mc pipe m/{BUCKET}/tables/events/{name}")
    lines = subscribe_until(kind_cluster, "hello-from-minio")
    assert lines
    listed = run(
        tool("kubectl"), "--context", kind_cluster, "get", "replica", "r2", "-o", "json"
    ).stdout
    assert json.loads(listed)["status"]["phase"] == "Running"
    kubectl(kind_cluster, "delete", "dataflow", DATAFLOW, "--wait=true", "--timeout=120s")
    kubectl(kind_cluster, "delete", "replica", "r2", "--wait=true", "--timeout=120s")
