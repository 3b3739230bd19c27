"""``run`` and ``replica`` on ``local-cluster[2,1,1024]``: the console scripts, as a user runs them.

Executors are separate JVM and Python processes with working directories of their own,
so a join + GROUP BY over ``table`` sources, restarted from its checkpoint after more
input arrives, only gives the right answer if executors read the sources and state
through the state location and never through the driver's memory or working directory.
The run happens in a clean environment (no ``PYSPARK_*``, no Makefile exports) with
relative paths, from a directory that is neither the repository nor the executors'.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.runtime.runs import DAY, T, dataflow_manifest, table_source, write_manifests

from dataflow_operator.api import injection
from dataflow_operator.runtime.inserts import insert_rows

pytestmark = [pytest.mark.spark, pytest.mark.local_cluster, pytest.mark.slow]

MASTER = "local-cluster[2,1,1024]"
SQL = (
    "SELECT c.region, sum(o.amount) AS total, count(*) AS orders "
    "FROM orders o JOIN customers c ON o.customer = c.customer GROUP BY c.region"
)
CUSTOMERS = [
    {"customer": "ann", "region": "north"},
    {"customer": "bob", "region": "south"},
    {"customer": "cid", "region": "north"},
]
FIRST_ORDERS = [
    {"customer": "ann", "amount": 5},
    {"customer": "bob", "amount": 7},
    {"customer": "cid", "amount": 11},
    {"customer": "nobody", "amount": 100},
]
LATER_ORDERS = [{"customer": "bob", "amount": 1}, {"customer": "ann", "amount": 2}]


def _oracle(orders: list[dict[str, object]]) -> Counter[tuple[str, ...]]:
    """The query's answer, computed in plain Python."""
    regions = {c["customer"]: c["region"] for c in CUSTOMERS}
    totals: dict[object, list[int]] = {}
    for order in orders:
        region = regions.get(order["customer"])
        if region is not None:
            entry = totals.setdefault(region, [0, 0])
            entry[0] += int(str(order["amount"]))
            entry[1] += 1
    return Counter({(str(r), str(t), str(n)): 1 for r, (t, n) in totals.items()})


def _run(cwd: Path, start: int) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).with_name("dataflow-operator")
    env = {"PATH": os.environ["PATH"], "HOME": str(cwd), "SPARK_LOCAL_IP": "127.0.0.1"}
    argv = [str(script), "run", "join.yaml", "--master", MASTER, "--state-dir", "state"]
    argv += ["--clock", "simulated", "--tick", "1d", "--start-time", str(start)]
    argv += ["--batches", "2"]
    return subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False
    )


def _consolidate(outputs: list[str]) -> Counter[tuple[str, ...]]:
    contents: Counter[tuple[str, ...]] = Counter()
    for out in outputs:
        for line in out.splitlines():
            _, diff, *values = line.split("\t")
            contents[tuple(values)] += int(diff)
    return +contents


def test_join_group_by_on_executors_in_other_processes_survives_a_restart(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    insert_rows(work / "data" / "customers", CUSTOMERS)
    insert_rows(work / "data" / "orders", FIRST_ORDERS)
    write_manifests(
        work / "join.yaml",
        [
            dataflow_manifest(
                "regions",
                SQL,
                [
                    table_source("orders", Path("data/orders"), "customer STRING, amount BIGINT"),
                    table_source(
                        "customers", Path("data/customers"), "customer STRING, region STRING"
                    ),
                ],
            )
        ],
    )
    first = _run(work, T)
    assert first.returncode == 0, first.stderr[-3000:]
    assert _consolidate([first.stdout]) == _oracle(FIRST_ORDERS)

    insert_rows(work / "data" / "orders", LATER_ORDERS)
    second = _run(work, T + 10 * DAY)
    assert second.returncode == 0, second.stderr[-3000:]
    assert _consolidate([first.stdout, second.stdout]) == _oracle(FIRST_ORDERS + LATER_ORDERS)
    # The restart resumed from the checkpoint: it retracts the old totals, not re-inserts all.
    assert any(line.split("\t")[1] == "-1" for line in second.stdout.splitlines())


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _request(port: int, path: str, method: str = "GET", body: Any = None, token: str = "") -> int:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except OSError:
        return 0


def _until(predicate: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_the_same_answer_streams_from_a_replica_on_that_master(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    insert_rows(work / "data" / "customers", CUSTOMERS)
    insert_rows(work / "data" / "orders", FIRST_ORDERS)
    token_file = work / "token"
    token_file.write_text("s3cret\n")
    port = _free_port()
    script = Path(sys.executable).with_name("dataflow-operator")
    env = {"PATH": os.environ["PATH"], "HOME": str(work), "SPARK_LOCAL_IP": "127.0.0.1"}
    replica_env = {
        **env,
        injection.ENV_CONTROL_ADDRESS: f"127.0.0.1:{port}",
        injection.ENV_STATE_URI: (work / "state").as_uri(),
        injection.ENV_SPARK_MASTER: MASTER,
        injection.ENV_CONTROL_TOKEN_FILE: str(token_file),
        injection.ENV_REPLICA: "r1",
    }
    spec = {
        "cluster": "default",
        "kind": "Subscribe",
        "sql": SQL,
        "sources": [
            {
                "name": "orders",
                "table": {
                    "path": str(work / "data" / "orders"),
                    "schema": "customer STRING, amount BIGINT",
                },
            },
            {
                "name": "customers",
                "table": {
                    "path": str(work / "data" / "customers"),
                    "schema": "customer STRING, region STRING",
                },
            },
        ],
    }
    desired = {"version": "v1", "dataflows": [{"name": "regions", "spec": spec}]}
    replica = subprocess.Popen(
        [str(script), "replica", "--tick", "200ms"],
        cwd=work,
        env=replica_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    subscriber: subprocess.Popen[str] | None = None
    try:
        _until(lambda: _request(port, "/healthz") == 200, 60, "the control API")
        assert _request(port, "/status") == 401  # the token is required

        def take_dataflow() -> bool:  # 503 while Spark starts: retried, as the operator does
            return _request(port, "/dataflows", "PUT", desired, token="s3cret") == 200

        _until(take_dataflow, 240, "the replica to take the dataflow")
        assert _request(port, "/readyz") == 200
        argv = [str(script), "subscribe", "regions", "--address", f"127.0.0.1:{port}"]
        argv += ["--token-file", str(token_file), "--as-of", "0"]
        subscriber = subprocess.Popen(
            argv,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        lines: list[str] = []
        stdout = subscriber.stdout
        assert stdout is not None
        reader = threading.Thread(target=lambda: lines.extend(stdout), daemon=True)
        reader.start()
        _until(lambda: _consolidate(["".join(lines)]) == _oracle(FIRST_ORDERS), 300, "the join")
        insert_rows(work / "data" / "orders", LATER_ORDERS)
        everything = _oracle(FIRST_ORDERS + LATER_ORDERS)
        _until(lambda: _consolidate(["".join(lines)]) == everything, 300, "the later orders")
        assert all(line.count("\t") == 4 for line in lines)  # TIME, DIFF and three columns
    finally:
        if subscriber is not None:
            subscriber.send_signal(signal.SIGINT)
            subscriber.wait(timeout=30)
        replica.send_signal(signal.SIGTERM)
        _, err = replica.communicate(timeout=120)
    assert replica.returncode == 0, err[-3000:]
    assert subscriber.returncode == 0
