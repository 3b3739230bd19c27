"""What the engine tells a source's reader: Spark's string options, read back typed.

A Python data source gets its settings as string options (they cross into the JVM and
back to the executors' Python workers); :class:`SourceOptions` is their one reading.
The columns the reader adds to a source's own are named here too.
"""

from __future__ import annotations

from dataflow_operator.runtime.changelog_store import DIFF, TIME
from dataflow_operator.runtime.clock import ClockFile
from dataflow_operator.runtime.sources.ingested import IngestedCollection
from dataflow_operator.runtime.sources.kafka_config import decode_properties
from dataflow_operator.runtime.sources.logs import INGESTED_DIR
from dataflow_operator.runtime.storage import Location

__all__ = [
    "BATCH_TIME",
    "HEARTBEAT",
    "NO_UNTIL",
    "RUNTIME_COLUMNS",
    "SOURCE_FORMAT",
    "SourceOptions",
]

DEFAULT_MAX_RECORDS = "1000000"
"""``maxRecordsPerBatch``'s default (the spec's, which the engine passes: this module is
imported by every reader, which need not load the API's models)."""
SOURCE_FORMAT = "dataflow_changelog"
"""The format name of :class:`~.reader.ChangelogSource`."""
HEARTBEAT = "__hb"
"""True on the one row per batch that carries only the batch's time."""
BATCH_TIME = "__bt"
"""The batch's time as a TIMESTAMP: the event-time watermark follows it."""
RUNTIME_COLUMNS = f"{TIME} BIGINT, {DIFF} BIGINT, {HEARTBEAT} BOOLEAN, {BATCH_TIME} TIMESTAMP"
NO_UNTIL = -1
"""``until`` and ``expiration`` when there is none."""


class SourceOptions:
    """The reader's settings, from the string options the engine passes."""

    def __init__(self, options: dict[str, str]) -> None:
        self.kind = options["kind"]
        self.log_dir = Location.of(options["log_dir"])
        self.path = Location.of(options["path"]) if "path" in options else self.log_dir
        """The directory read (a kafka source has none: its logs)."""
        self.format = options.get("format", "json")
        self.clock = ClockFile(Location.of(options["clock"])) if options.get("clock") else None
        self.until = int(options.get("until", str(NO_UNTIL)))
        self.expiration = int(options.get("expiration", str(NO_UNTIL)))
        """The dataflow's expiration (``until`` only says how far a restart replays)."""
        self.time_column = options.get("time_column", "time")
        self.diff_column = options.get("diff_column", "diff")
        lateness = options.get("lateness")
        self.lateness = int(lateness) if lateness else None
        """A changelog source's allowed lateness (ms): complete through the clock's time
        minus it (``None``: only its data and its producer's upper move it)."""
        self.index = int(options.get("source_index", "0"))
        """The source's position in the spec (its offsets say it)."""
        self.bootstrap_servers = options.get("bootstrap_servers", "")
        self.topic = options.get("topic", "")
        self.group_id = options.get("group_id", "")
        self.max_records = int(options.get("max_records", DEFAULT_MAX_RECORDS))
        self.kafka_properties = decode_properties(
            options.get("kafka_properties", ""), "kafka_properties"
        )
        """The source's own Kafka client properties (``properties``: no secrets)."""
        self.kafka_properties_from_env = decode_properties(
            options.get("kafka_properties_from_env", ""), "kafka_properties_from_env"
        )
        """Kafka client property → the environment variable holding its value (only the
        names travel in the options; the values are read where a client is made)."""
        self.kafka_client = options.get("kafka_client", "")
        """A module making the Kafka client (default: confluent-kafka)."""
        self.wall_clock = options.get("wall_clock", "true") == "true"
        """Whether the source's times are wall-clock milliseconds (its timeline)."""
        marker = options.get("dropped_marker")
        self.dropped_marker = Location.of(marker) if marker else None

    @property
    def ingested(self) -> IngestedCollection:
        """The source's ingested collection (beside its other logs)."""
        return IngestedCollection(self.log_dir.child(INGESTED_DIR))

    def dropped(self) -> bool:
        """True once the dataflow was dropped (its token wrote the marker)."""
        return self.dropped_marker is not None and self.dropped_marker.stamp() is not None
