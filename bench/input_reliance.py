"""Benchmark: a long run with bounded live contents keeps a flat state location.

A ``changelog`` source with ``cleanSource: Delete`` gets one new file per batch: ``--rows``
inserts at the batch's time, and the deletes of the rows inserted ``--window`` batches
before, so the source's live contents stay at ``rows × window`` rows while its history
grows. A dataflow keeps a 30-day temporal window of them (``WHERE mz_now() <= event_ts +
INTERVAL '30 days'``), an Index. The clock is simulated, one day per batch, ``--batches``
batches (default 1,000); the replica releases consumed files as a local run does. Every
``--every`` batches it prints the state location's size (all of it; the sources' ingested
collections; the output changelog), the files left upstream, the Index's rows and the
median step time since the last line.

    .venv/bin/python bench/input_reliance.py [--batches N] [--rows N] [--window D]
        [--every N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from dataflow_operator.api.dataflow import DataflowSpec
from dataflow_operator.core.time import format_timestamp, parse_timestamp

T = parse_timestamp("2026-01-01T00:00:00Z")
DAY = 86_400_000


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _update(batch: int, index: int, event: int, time: int, diff: int) -> str:
    row = {"id": batch * 1000 + index, "event_ts": format_timestamp(event)}
    return json.dumps({**row, "time": time, "diff": diff})


def main() -> None:
    """Run the benchmark and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=10)
    parser.add_argument("--window", type=int, default=7, help="batches a row lives")
    parser.add_argument("--every", type=int, default=100)
    parser.add_argument(
        "--detail", action="store_true", help="also print the size of each state directory"
    )
    args = parser.parse_args()

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from dataflow_operator.runtime.engine.config import EngineConfig
    from dataflow_operator.runtime.engine.engine import Engine, dataflows_from
    from dataflow_operator.runtime.session import spark_session

    work = Path(tempfile.mkdtemp(prefix="input-reliance-"))
    upstream, state = work / "events", work / "state"
    upstream.mkdir()
    spec = DataflowSpec.model_validate(
        {
            "cluster": "bench",
            "kind": "Index",
            "sources": [
                {
                    "name": "events",
                    "changelog": {
                        "path": str(upstream),
                        "format": "json",
                        "schema": "id BIGINT, event_ts TIMESTAMP",
                        "cleanSource": "Delete",
                    },
                }
            ],
            "sql": "SELECT id, event_ts FROM events "
            "WHERE mz_now() <= event_ts + INTERVAL '30 days'",
        }
    )
    spark = spark_session(master="local[2]", app_name="bench-input-reliance")
    engine = Engine(spark, EngineConfig(state, T, release_upstream=True))
    print(
        f"{'batch':>6} {'state KiB':>10} {'ingested KiB':>13} {'ingested rows':>14} "
        f"{'changelog KiB':>14} {'upstream files':>15} {'index rows':>11} "
        f"{'step ms (median)':>17}"
    )
    try:
        assert not engine.apply(dataflows_from([("window", spec)])).failed
        durations: list[float] = []
        for batch in range(1, args.batches + 1):
            now = T + batch * DAY
            rows = [_update(batch, i, now, now, 1) for i in range(args.rows)]
            if batch > args.window:
                then = T + (batch - args.window) * DAY
                rows += [_update(batch - args.window, i, then, now, -1) for i in range(args.rows)]
            (upstream / f"{batch:06d}.json").write_text("\n".join(rows) + "\n")
            started = time.perf_counter()
            engine.step(now)
            durations.append((time.perf_counter() - started) * 1000)
            if batch % args.every == 0:
                engine.release_inputs(force=True)
                sources = engine.report().dataflows[0].sources
                ingested = sum(s.ingested_bytes for s in sources)
                rows_in = sum(s.ingested_rows for s in sources)
                live = sum(row[-1] for row in engine.peek("window").rows)
                changelog = _size(state / "dataflows" / "window" / "changelog")
                print(
                    f"{batch:>6} {_size(state) / 1024:>10.0f} {ingested / 1024:>13.1f} "
                    f"{rows_in:>14} {changelog / 1024:>14.0f} "
                    f"{len(list(upstream.iterdir())):>15} {live:>11} "
                    f"{statistics.median(durations):>17.0f}",
                    flush=True,
                )
                if args.detail:
                    root = state / "dataflows" / "window"
                    parts = sorted(p for p in root.rglob("*") if p.is_dir())
                    sizes = {
                        str(p.relative_to(root)): _size(p)
                        for p in parts
                        if root in (p.parent, p.parent.parent)
                    }
                    print("        " + ", ".join(f"{k}={v // 1024}K" for k, v in sizes.items()))
                durations.clear()
    finally:
        engine.close()
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
