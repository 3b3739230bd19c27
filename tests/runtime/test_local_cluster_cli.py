"""``dataflow-operator run --master local-cluster[2,1,1024]``: the console script, as a user runs it.

Executors are separate JVM and Python processes with working directories of their own,
so a join + GROUP BY over ``table`` sources, restarted from its checkpoint after more
input arrives, only gives the right answer if executors read the sources and state
through the state location and never through the driver's memory or working directory.
The run happens in a clean environment (no ``PYSPARK_*``, no Makefile exports) with
relative paths, from a directory that is neither the repository nor the executors'.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from tests.runtime.runs import DAY, T, dataflow_manifest, table_source, write_manifests

from dataflow_operator.runtime.insert_command import insert_rows

pytestmark = pytest.mark.spark

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
