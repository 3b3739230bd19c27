"""``kill -9`` at random points of a run whose source is released as it is read: nothing
is lost or doubled, and every restart resumes without the upstream's released files."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from tests.runtime.runs import T, dataflow_manifest, write_manifests

pytestmark = [pytest.mark.spark, pytest.mark.slow]

FILES = 100
KILLS = 5
SQL = "SELECT k, sum(v) AS total, count(*) AS n FROM events GROUP BY k"


def _updates(index: int, rng: random.Random) -> list[dict[str, int]]:
    """File ``index``: inserts, and sometimes the delete of an earlier file's row."""
    rows = [
        {"id": index * 10 + i, "k": rng.randrange(5), "v": rng.randrange(100), "diff": 1}
        for i in range(3)
    ]
    if index >= 4 and rng.random() < 0.5:
        earlier = index - 4
        old = random.Random(earlier)  # the earlier file's rows, drawn again
        first = {"id": earlier * 10, "k": old.randrange(5), "v": old.randrange(100)}
        rows.append({**first, "diff": -1})
    return [{**row, "time": T + index} for row in rows]


def _oracle(written: list[list[dict[str, int]]]) -> Counter[tuple[int, int, int]]:
    contents: Counter[tuple[int, int, int]] = Counter()
    for updates in written:
        for u in updates:
            contents[(u["id"], u["k"], u["v"])] += u["diff"]
    groups: dict[int, list[int]] = {}
    for (_, k, v), count in contents.items():
        assert count in (0, 1)
        if count:
            groups.setdefault(k, [0, 0])
            groups[k][0] += v
            groups[k][1] += 1
    return Counter({(k, total, n): 1 for k, (total, n) in groups.items()})


def _index_contents(changelog: Path) -> Counter[tuple[int, int, int]]:
    contents: Counter[tuple[int, int, int]] = Counter()
    for part in sorted(changelog.glob("part-*.parquet")):
        for row in pq.read_table(part).to_pylist():
            contents[(row["k"], row["total"], row["n"])] += row["__diff"]
    return +contents


def test_kills_at_random_points_lose_and_double_nothing(tmp_path: Path) -> None:
    rng = random.Random(20261125)
    events = tmp_path / "events"
    events.mkdir()
    source = {
        "name": "events",
        "changelog": {
            "path": "events",
            "format": "json",
            "schema": "id BIGINT, k INT, v INT",
            "cleanSource": "Delete",
        },
    }
    write_manifests(tmp_path / "sums.yaml", [dataflow_manifest("sums", SQL, [source], "Index")])
    written: list[list[dict[str, int]]] = []

    def writer() -> None:
        for index in range(FILES):
            updates = _updates(index, random.Random(index))
            text = "".join(json.dumps(u) + "\n" for u in updates)
            (events / f".{index:04d}.tmp").write_text(text)
            os.replace(events / f".{index:04d}.tmp", events / f"{index:04d}.json")
            written.append(updates)
            time.sleep(0.15)

    script = Path(sys.executable).with_name("dataflow-operator")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "SPARK_LOCAL_IP": "127.0.0.1"}
    argv = [str(script), "run", "sums.yaml", "--master", "local[1]", "--state-dir", "state"]
    argv += ["--clock", "simulated", "--tick", "1d", "--start-time", str(T + FILES)]
    feeding = threading.Thread(target=writer)
    feeding.start()
    kills = 0
    while kills < KILLS:
        process = subprocess.Popen(
            argv, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        time.sleep(rng.uniform(4.0, 12.0))  # Spark's start, then somewhere in the batches
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
            kills += 1
        process.wait()
    feeding.join()
    final = subprocess.run(
        [*argv, "--batches", "3"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert final.returncode == 0, final.stderr[-3000:]
    assert len(written) == FILES
    assert list(events.iterdir()) == []  # every file was read, ingested and released
    changelog = tmp_path / "state" / "dataflows" / "sums" / "changelog"
    assert _index_contents(changelog) == _oracle(written)
