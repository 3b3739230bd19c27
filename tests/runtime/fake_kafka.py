"""A Kafka topic in files, for runtime tests on Spark (no broker runs here): name this
module in ``DATAFLOW_KAFKA_CLIENT`` and give a directory as ``bootstrapServers``.

``<dir>/<topic>/<partition>.jsonl`` holds a partition's records, one ``{"ts", "value"}``
per line (the line's index is its offset); ``<dir>/<topic>/low.json`` says below which
offset each partition's records were deleted (retention); ``<dir>/groups/<group>.json``
holds the consumer groups' committed offsets."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dataflow_operator.runtime.sources.kafka_client import KafkaRecord
from dataflow_operator.runtime.sources.options import SourceOptions


def produce(servers: Path, topic: str, partition: int, ts: int, value: dict[str, Any]) -> None:
    """Append one record."""
    path = servers / topic / f"{partition}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as out:
        out.write(json.dumps({"ts": ts, "value": json.dumps(value)}) + "\n")


def delete_records(servers: Path, topic: str, below: Mapping[int, int]) -> None:
    """Retention: the records below these offsets are gone."""
    (servers / topic / "low.json").write_text(json.dumps({str(p): o for p, o in below.items()}))


def committed(servers: Path, group: str) -> dict[str, dict[str, int]]:
    """A group's committed offsets, topic → partition → offset."""
    path = servers / "groups" / f"{group}.json"
    found: dict[str, dict[str, int]] = json.loads(path.read_text()) if path.exists() else {}
    return found


class FileTopic:
    """A KafkaReader over the files."""

    def __init__(self, servers: Path, topic: str) -> None:
        self.directory = servers / topic

    def _records(self, partition: int) -> list[dict[str, Any]]:
        path = self.directory / f"{partition}.jsonl"
        lines = path.read_text().splitlines() if path.exists() else []
        return [json.loads(line) for line in lines]

    def _low(self, partition: int) -> int:
        path = self.directory / "low.json"
        return int(json.loads(path.read_text()).get(str(partition), 0)) if path.exists() else 0

    def partitions(self) -> list[int]:
        return sorted(int(p.stem) for p in self.directory.glob("*.jsonl"))

    def watermarks(self, partitions: Sequence[int]) -> dict[int, tuple[int, int]]:
        return {p: (self._low(p), len(self._records(p))) for p in partitions}

    def fetch(
        self, starts: Mapping[int, int], max_records: int, timeout: float
    ) -> tuple[list[KafkaRecord], dict[int, int]]:
        found: list[KafkaRecord] = []
        reached: dict[int, int] = {}
        for partition, start in sorted(starts.items()):
            records = self._records(partition)
            for offset in range(max(start, self._low(partition)), len(records)):
                if len(found) == max_records:
                    break
                record = records[offset]
                found.append(KafkaRecord(partition, offset, record["ts"], record["value"].encode()))
                reached[partition] = offset + 1
        return found, reached

    def close(self) -> None:
        pass


class FileGroups:
    """A GroupAdmin over the files."""

    def __init__(self, servers: Path) -> None:
        self.directory = servers / "groups"

    def committed(self, group: str, topic: str) -> dict[int, int]:
        offsets = committed(self.directory.parent, group).get(topic, {})
        return {int(p): o for p, o in offsets.items()}

    def commit(self, group: str, topic: str, offsets: Mapping[int, int]) -> None:
        everything = committed(self.directory.parent, group)
        everything.setdefault(topic, {}).update({str(p): o for p, o in offsets.items()})
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / f"{group}.json").write_text(json.dumps(everything))

    def close(self) -> None:
        pass


def reader(options: SourceOptions) -> FileTopic:
    """The factory the runtime calls for a source's reader."""
    return FileTopic(Path(options.bootstrap_servers), options.topic)


def admin(servers: str, config: Mapping[str, str | bool]) -> FileGroups:
    """The factory the runtime calls for an admin client (files need no configuration)."""
    return FileGroups(Path(servers))
