"""A kafka dataflow killed (-9) at random points while a producer writes to a real broker
(Tansu): every record printed exactly once over all the runs, none lost, none repeated.

The default case is small (a few hundred records, two kills) so that it runs in the slow
tier; the issue's wide case is chosen by the environment:

    DATAFLOW_KAFKA_KILLS=5 DATAFLOW_KAFKA_KILL_RECORDS=100000 pytest -m slow \\
        tests/runtime/test_kafka_kills.py

Each run is ``dataflow-operator run`` in a process of its own (its own Spark), on the wall
clock, on one state directory; its stdout is kept per run and the lines of all the runs
are consolidated (diffs summed per row).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from tests.kafka_broker import TansuBroker, create_topic, fresh_topic, produce
from tests.runtime.runs import dataflow_manifest, write_manifests

pytestmark = [pytest.mark.kafka_broker, pytest.mark.spark, pytest.mark.slow]

KILLS = int(os.environ.get("DATAFLOW_KAFKA_KILLS", "2"))
RECORDS = int(os.environ.get("DATAFLOW_KAFKA_KILL_RECORDS", "400"))
PARTITIONS = 4
WAIT_SECONDS = float(os.environ.get("DATAFLOW_KAFKA_KILL_WAIT", "600"))
"""How long the last run may take to print every record."""


def _printed(outs: list[Path]) -> dict[str, int]:
    """Each url's diffs summed over every run's output."""
    total: dict[str, int] = {}
    for out in outs:
        for line in out.read_text().splitlines():
            fields = line.split("\t")
            if len(fields) == 3:
                total[fields[2]] = total.get(fields[2], 0) + int(fields[1])
    return total


def _start(manifest: Path, state: Path, out: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "dataflow_operator", "run", str(manifest)]
    command += ["--state-dir", str(state), "--tick", "200ms", "--master", "local[2]"]
    with out.open("wb") as stdout, (out.with_suffix(".err")).open("wb") as stderr:
        return subprocess.Popen(command, stdout=stdout, stderr=stderr, env=env)


def _write(servers: str, topic: str, rng: random.Random, done: threading.Event) -> None:
    """Produce the records in 40 chunks at random intervals, at the wall clock's time."""
    chunk = max(1, RECORDS // 40)
    for first in range(0, RECORDS, chunk):
        now = int(time.time() * 1000)
        rows = [
            (i % PARTITIONS, now, json.dumps({"url": f"/{i}"}))
            for i in range(first, min(RECORDS, first + chunk))
        ]
        produce(servers, topic, rows)
        time.sleep(rng.uniform(0.05, 0.5))
    done.set()


def test_kill_9_at_random_points_loses_and_repeats_nothing(
    tmp_path: Path, kafka_broker: TansuBroker
) -> None:
    servers, topic = kafka_broker.servers, fresh_topic("clicks")
    create_topic(servers, topic, PARTITIONS)
    kafka = {"bootstrapServers": servers, "topic": topic, "schema": "url STRING"}
    kafka["maxRecordsPerBatch"] = max(50, RECORDS // 20)
    manifest = write_manifests(
        tmp_path / "feed.yaml",
        [dataflow_manifest("feed", "SELECT url FROM clicks", [{"name": "clicks", "kafka": kafka}])],
    )
    rng = random.Random(35)
    done = threading.Event()
    producer = threading.Thread(target=_write, args=(servers, topic, rng, done), daemon=True)
    producer.start()
    outs: list[Path] = []
    state = tmp_path / "state"
    try:
        for kill in range(KILLS + 1):
            out = tmp_path / f"run-{kill}.out"
            outs.append(out)
            replica = _start(manifest, state, out)
            try:
                if kill < KILLS:  # killed once it has printed, at a random point after
                    deadline = time.monotonic() + WAIT_SECONDS
                    while not out.read_text() and time.monotonic() < deadline:
                        assert replica.poll() is None, out.with_suffix(".err").read_text()[-2000:]
                        time.sleep(0.2)
                    time.sleep(rng.uniform(0.0, 3.0))
                    replica.send_signal(signal.SIGKILL)
                    replica.wait(30)
                    continue
                producer.join(WAIT_SECONDS)
                assert done.is_set()
                deadline = time.monotonic() + WAIT_SECONDS
                while len(_printed(outs)) < RECORDS and time.monotonic() < deadline:
                    assert replica.poll() is None, out.with_suffix(".err").read_text()[-2000:]
                    time.sleep(0.5)
                time.sleep(2)  # anything printed twice would come now
            finally:
                if replica.poll() is None:
                    replica.send_signal(signal.SIGKILL)
                    replica.wait(30)
    finally:
        done.set()
    printed = _printed(outs)
    wrong = {url: n for url, n in printed.items() if n != 1}
    missing = [f"/{i}" for i in range(RECORDS) if f"/{i}" not in printed]
    assert not wrong, f"printed other than once: {sorted(wrong.items())[:10]}"
    assert not missing, f"never printed: {missing[:10]} ({len(missing)} in all)"
