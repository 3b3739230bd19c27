"""Benchmark: what idle dataflows cost (issue 38, item 4). Prints figures.

``dataflow-operator run --clock wall`` in a subprocess over ``--dataflows N`` one-row
temporal-filter dataflows (each its own table, one row inserted before the run) with no
input arriving afterwards. Once every dataflow has printed its row and ``--settle``
seconds have passed, the CPU time of the run's whole process tree (driver JVM, Python
workers) is read from ``/proc`` over ``--window`` seconds: the cores it used. With
``--due S`` every row also leaves the filter S seconds after the run starts (its
retraction is due then): the time from that instant to its ``-1`` line is printed too.

Targets on a 2-core machine: an idle dataflow ≤ 0.02 cores, 100 ≤ 0.5 cores, a due
retraction within one tick of its time.

    .venv/bin/python bench/idle.py [--dataflows 1] [--tick 1s] [--window 30]
        [--settle 10] [--due 40] [--by-process] [--log FILE]

The machine is shared (2 cores, other agents): figures vary from run to run; the
load average is printed with them.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

BIN = Path(sys.executable).parent
CLI = str(BIN / "dataflow-operator")
TICKS = os.sysconf("SC_CLK_TCK")
SCHEMA = "id INT, event_ts TIMESTAMP"


def _manifest(root: Path, count: int, window_s: int) -> Path:
    documents = []
    for index in range(count):
        table = root / f"events{index}"
        table.mkdir()
        documents.append(
            {
                "apiVersion": "dataflow.dev/v1alpha1",
                "kind": "Dataflow",
                "metadata": {"name": f"idle{index}"},
                "spec": {
                    "cluster": "default",
                    "kind": "Subscribe",
                    "sources": [
                        {"name": "events", "table": {"path": str(table), "schema": SCHEMA}}
                    ],
                    "sql": (
                        "SELECT id, event_ts FROM events "
                        f"WHERE mz_now() <= event_ts + INTERVAL '{window_s} seconds'"
                    ),
                },
            }
        )
    path = root / "idle.yaml"
    path.write_text("\n---\n".join(json.dumps(d) for d in documents))  # JSON is YAML
    return path


def _insert(root: Path, count: int, event_time: float) -> None:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(event_time))
    stamp += f".{int(event_time * 1000) % 1000:03d}Z"
    for index in range(count):
        row = json.dumps({"id": index, "event_ts": stamp})
        subprocess.run(
            [CLI, "insert", str(root / f"events{index}"), row], check=True, capture_output=True
        )


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants, now."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, []))
    return found


def _cpu_by_process(pid: int) -> dict[tuple[int, str], float]:
    """User + system CPU seconds of the tree's live processes (and of their waited-for
    children), by ``(pid, command)``."""
    found = {}
    for member in _tree(pid):
        try:
            fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
            command = Path(f"/proc/{member}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        name = command.decode(errors="replace")
        name = "JVM" if " org.apache.spark" in name else name.rsplit("/", 1)[-1][:60]
        found[(member, name)] = sum(int(v) for v in fields[11:15]) / TICKS
    return found


def _diff(line: str) -> str:
    """The diff of a printed update (``[NAME<TAB>]TIME<TAB>DIFF<TAB>…``), or ``""``."""
    fields = line.split("\t")
    if fields and not fields[0].isdigit():
        fields = fields[1:]  # several dataflows: each line starts with its name
    return fields[1] if len(fields) > 2 else ""


def _reader(stream: object, lines: queue.Queue[tuple[float, str]]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        lines.put((time.time(), line.rstrip("\n")))


def _retractions(lines: queue.Queue[tuple[float, str]], due_at: float, count: int) -> None:
    """Wait for the ``-1`` lines due at ``due_at`` (epoch s); print how late they came."""
    lags = []
    deadline = max(time.time(), due_at) + 120
    while len(lags) < count and time.time() < deadline:
        try:
            seen, line = lines.get(timeout=5)
        except queue.Empty:
            continue
        if _diff(line) == "-1":
            lags.append(seen - due_at)
    if not lags:
        print("no retraction printed within 120 s of its time")
        return
    print(
        f"retractions due {time.strftime('%H:%M:%S', time.gmtime(due_at))}: {len(lags)} of "
        f"{count} printed, {min(lags):.2f} s to {max(lags):.2f} s after their time"
    )


def main() -> None:
    """Run the benchmark; see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataflows", type=int, default=1)
    parser.add_argument("--tick", default="1s")
    parser.add_argument("--window", type=float, default=30.0)
    parser.add_argument("--settle", type=float, default=10.0)
    parser.add_argument("--due", type=float, default=None)
    parser.add_argument("--by-process", action="store_true")
    parser.add_argument("--log", help="write the run's log (stderr) here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="idle-bench-") as folder:
        root = Path(folder)
        start = time.time()
        # each row leaves the filter --due seconds after now (without, a day later)
        window_s = 1
        event_time = start + (86_400 if args.due is None else args.due) - window_s
        manifest = _manifest(root, args.dataflows, window_s)
        _insert(root, args.dataflows, event_time)
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
        command = [CLI, "run", "--clock", "wall", "--tick", args.tick, "--master", "local[2]"]
        command += ["--state-dir", str(root / "state"), str(manifest)]
        log = open(args.log, "w") if args.log else subprocess.DEVNULL  # noqa: SIM115 - the run's life
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True, env=env)
        lines: queue.Queue[tuple[float, str]] = queue.Queue()
        threading.Thread(target=_reader, args=(process.stdout, lines), daemon=True).start()
        try:
            inserted = 0
            while inserted < args.dataflows:
                _, line = lines.get(timeout=max(300, 10 * args.dataflows))
                inserted += _diff(line) == "1"
            hydrated = time.time() - start
            time.sleep(args.settle)
            before, at = _cpu_by_process(process.pid), time.monotonic()
            time.sleep(args.window)
            after, elapsed = _cpu_by_process(process.pid), time.monotonic() - at
            spent = {key: (value - before.get(key, 0.0)) / elapsed for key, value in after.items()}
            used = sum(spent.values())
            load = os.getloadavg()[0]
            print(
                f"{args.dataflows} idle dataflow(s), tick {args.tick}: {used:.3f} cores "
                f"({used / args.dataflows:.4f} per dataflow) over {args.window:.0f} s; "
                f"all printed their row {hydrated:.1f} s after the start; load {load:.2f}"
            )
            if args.by_process:
                for (member, name), cores in sorted(spent.items(), key=lambda kv: -kv[1])[:8]:
                    print(f"  {cores:.4f} cores  pid {member}  {name}")
            if args.due is not None:
                _retractions(lines, start + args.due, args.dataflows)
        finally:
            process.terminate()
            process.wait(timeout=60)


if __name__ == "__main__":
    main()
