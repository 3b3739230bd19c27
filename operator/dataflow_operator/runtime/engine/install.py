"""Starting one dataflow's query: its state, expiration, sources and strategy.

:class:`DataflowStarter` is what :meth:`Engine.apply <.engine.Engine.apply>` calls for each
new or changed dataflow: it resets state made for another spec (keeping the sources'
ingested collections, design 3), derives the dataflow's expiration and ``until`` with
the core's rules, turns each source into the options of its reader, builds the
streaming DataFrame and starts it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable

from pydantic import ValidationError
from pyspark.sql import SparkSession

from dataflow_operator.api.catalog import Catalog
from dataflow_operator.api.dataflow import (
    DEFAULT_MAX_RECORDS_PER_BATCH,
    DataflowKindField,
    DataflowSpec,
    Source,
)
from dataflow_operator.api.protocol import DesiredDataflow
from dataflow_operator.core.errors import InvalidSpec, UnknownSource
from dataflow_operator.core.time import Frontier
from dataflow_operator.core.timelines import Timeline
from dataflow_operator.logs import get_logger
from dataflow_operator.runtime.engine.config import EngineConfig
from dataflow_operator.runtime.engine.expiry import expiration_of
from dataflow_operator.runtime.engine.layout import DataflowLayout, last_offsets
from dataflow_operator.runtime.engine.running import (
    DROPPED_MARKER,
    RETRIES,
    BatchOutput,
    DataflowSettings,
    RunningDataflow,
)
from dataflow_operator.runtime.errors import is_data_error, one_line
from dataflow_operator.runtime.sources.frames import SourceInput
from dataflow_operator.runtime.sources.ingested import IngestedCollection
from dataflow_operator.runtime.sources.kafka import default_group_id
from dataflow_operator.runtime.sources.kafka_client import CLIENT_ENV
from dataflow_operator.runtime.sources.kafka_config import encode_properties
from dataflow_operator.runtime.sources.logs import HELD_FILE, INGESTED_DIR, HeldInput
from dataflow_operator.runtime.storage import Location
from dataflow_operator.runtime.strategies import STATE_FORMAT
from dataflow_operator.runtime.strategies.build import BuiltDataflow, build_dataflow

__all__ = ["SOURCE_FILE", "DataflowStarter", "Upstream", "remove_state", "state_fingerprint"]

SOURCE_FILE = "source.json"
"""The source's settings its logs were made with (in its log directory)."""

log = get_logger(__name__)

Upstream = Callable[[str], "RunningDataflow | str"]
"""The running dataflow of a name, or why it is not running."""


RETRY_PAUSE = 1.0
"""Seconds between a build that failed for a reason other than the query and its retry."""


def build_with_retries(name: str, build: Callable[[], BuiltDataflow]) -> BuiltDataflow:
    """``build()``, again up to :data:`RETRIES` times while it fails for a reason other
    than the query or its data (a Python worker that did not start on a busy machine, a
    lost connection); the query's own errors at once."""
    for attempt in range(RETRIES + 1):
        try:
            return build()
        except Exception as error:
            if attempt == RETRIES or is_data_error(error):
                raise
            log.warning("dataflow not built; retrying", dataflow=name, error=one_line(error))
            time.sleep(RETRY_PAUSE * (attempt + 1))
    raise AssertionError("unreachable")


class DataflowStarter:
    """Starts dataflows on one Spark session, in the replica's state location."""

    def __init__(
        self,
        spark: SparkSession,
        config: EngineConfig,
        on_output: Callable[[BatchOutput], None] | None = None,
    ) -> None:
        self.spark = spark
        self.config = config
        self.on_output = on_output
        self.state = config.state

    def layout(self, name: str, spec: DataflowSpec) -> DataflowLayout:
        """Where dataflow ``name``'s files live (a MaterializedView's sink included)."""
        sink = Location.of(spec.sink.path) if spec.sink is not None else None
        return DataflowLayout.of(self.state, name, sink)

    @staticmethod
    def spec_changed(layout: DataflowLayout, spec: DataflowSpec) -> bool:
        """True when the state on disk was made for another spec (and will be reset)."""
        recorded = layout.spec_file.read_text_or_none()
        return recorded is not None and recorded != state_fingerprint(spec)

    def start(
        self, catalog: Catalog, desired: DesiredDataflow, upstream: Upstream
    ) -> RunningDataflow:
        """Start ``desired``'s query; ``upstream`` finds the dataflows it reads."""
        name, spec = desired.name, desired.spec
        for problem in catalog.problems(name):
            raise problem.error
        layout = self.layout(name, spec)
        self._reset_if_changed(layout, spec)
        # Input a previous run held back at its expiration is part of the inputs' upper
        # (the expiration's last rule): this run reads it instead of stopping again.
        inputs_upper = self.config.start_time
        for source in spec.sources:
            if source.changelog is not None or source.kafka is not None:
                logs = layout.source_logs(source.name)
                held = HeldInput.read(logs)
                if held is not None:
                    inputs_upper = max(inputs_upper, held.time + 1)
                    logs.child(HELD_FILE).delete()
        expiration, until = expiration_of(
            catalog, name, self.config.expiration, Frontier.at(inputs_upper)
        )
        previous = last_offsets(layout.checkpoint)
        previous_until = None
        if previous is not None and previous[1]:
            recorded = int(previous[1][0].get("until", -1))
            previous_until = None if recorded < 0 else recorded
        marker = {"dropped_marker": layout.root.child(DROPPED_MARKER).uri}  # sources stop on it
        inputs = [
            self._source_input(layout, index, source, until, upstream, cluster=spec.cluster)
            for index, source in enumerate(spec.sources)
        ]
        inputs = [SourceInput(i.name, i.data_ddl, {**i.options, **marker}) for i in inputs]
        built = build_with_retries(
            name,
            lambda: build_dataflow(
                self.spark,
                spec.sql,
                inputs,
                until.lower,
                previous_until,
                work_dir=layout.work("general"),
            ),
        )
        settings = DataflowSettings(
            name=name,
            kind=spec.kind.value,
            generation=desired.generation,
            expiration=expiration,
            until=until,
            layout=layout,
            reads=tuple(s.dataflow.name for s in spec.sources if s.dataflow is not None),
        )
        running = RunningDataflow(
            self.spark,
            settings,
            self.on_output if spec.kind is DataflowKindField.SUBSCRIBE else None,
            state_partitions=self.config.state_partitions,
        )
        running.start(built)
        return running

    def _reset_if_changed(self, layout: DataflowLayout, spec: DataflowSpec) -> None:
        """A changed spec starts over: its old checkpoint and changelog are for another query
        (or for operators whose state another runtime laid out: :data:`STATE_FORMAT`)."""
        fingerprint = state_fingerprint(spec)
        recorded = layout.spec_file.read_text_or_none()
        if recorded == fingerprint:
            return
        if recorded is not None:
            remove_state(layout, keep=spec.sources)
        layout.root.make_dirs()
        layout.spec_file.write_text(fingerprint)

    def _source_input(
        self,
        layout: DataflowLayout,
        index: int,
        source: Source,
        until: Frontier,
        upstream: Upstream,
        *,
        cluster: str,
    ) -> SourceInput:
        expiration = str(-1 if until.lower is None else until.lower)
        logs = layout.source_logs(source.name)
        logs.child(SOURCE_FILE).write_text(source.model_dump_json(by_alias=True))
        options: dict[str, str] = {
            "log_dir": logs.uri,
            "source_index": str(index),
            "until": expiration,  # build_dataflow clears it when nothing is ever replayed
            "expiration": expiration,
            "clock": layout.clock.uri,
        }
        where = f'source "{source.name}"'
        if source.dataflow is not None:
            running = upstream(source.dataflow.name)
            if isinstance(running, str) or running.built is None:
                reason = running if isinstance(running, str) else "it has not started"
                raise UnknownSource(
                    f'{where} reads dataflow "{source.dataflow.name}", which is not running: '
                    f"{reason}"
                )
            options |= {"kind": "dataflow", "path": running.store.location.uri}
            return SourceInput(source.name, running.built.data_ddl, options)
        if source.kafka is not None:
            kafka, name = source.kafka, layout.root.name
            timeline = source.declared_timeline
            options |= {
                "kind": "kafka",
                "bootstrap_servers": kafka.bootstrap_servers,
                "topic": kafka.topic,
                "format": kafka.format,
                "group_id": kafka.group_id or default_group_id(cluster, name, source.name),
                "max_records": str(kafka.max_records_per_batch),
                "wall_clock": str(timeline == Timeline.epoch_milliseconds()).lower(),
                "kafka_client": os.environ.get(CLIENT_ENV, ""),
                # the variables' names only: their values are read where a client is made
                "kafka_properties": encode_properties(kafka.properties),
                "kafka_properties_from_env": encode_properties(kafka.properties_from_env),
            }
            return SourceInput(source.name, kafka.schema_, options)
        settings = source.table or source.files or source.changelog
        assert settings is not None
        path = Location.of(settings.path)
        # A table's directory is made by its first insert: until then it is empty.
        if source.table is None and not path.is_dir():
            raise InvalidSpec(f"{where}: directory {path} does not exist")
        options |= {"path": path.uri}
        if source.table is not None:
            options |= {"kind": "table", "format": "json"}
        elif source.files is not None:
            options |= {"kind": "files", "format": source.files.format.value}
        elif source.changelog is not None:
            options |= {
                "kind": "changelog",
                "format": source.changelog.format.value,
                "time_column": source.changelog.time_column,
                "diff_column": source.changelog.diff_column,
            }
            if source.changelog.lateness is not None:
                options["lateness"] = str(source.changelog.lateness.millis)
        return SourceInput(source.name, settings.schema_, options)


def state_fingerprint(spec: DataflowSpec) -> str:
    """What a dataflow's checkpoint was made for (its layout's ``spec.json``): the spec, and
    the :data:`~dataflow_operator.runtime.strategies.STATE_FORMAT` of its operators' state."""
    spec_json = spec.model_dump_json(by_alias=True)
    return f'{{"stateFormat": {STATE_FORMAT}, "spec": {spec_json}}}'


def _reads_alike(recorded: str | None, source: Source) -> bool:
    """Whether the source recorded (:data:`SOURCE_FILE`) has ``source``'s settings, but
    for how many records a batch reads (which records, and their times, do not depend on
    it); a field added since it was recorded reads back as its default (a kafka source
    recorded before ``properties`` existed is kept)."""
    if recorded is None:
        return False
    try:
        return _paced_alike(Source.model_validate_json(recorded)) == _paced_alike(source)
    except ValidationError:
        return False


def _paced_alike(source: Source) -> Source:
    """``source`` with the default batch size (``maxRecordsPerBatch``)."""
    if source.kafka is None:
        return source
    kafka = source.kafka.model_copy(update={"max_records_per_batch": DEFAULT_MAX_RECORDS_PER_BATCH})
    return source.model_copy(update={"kafka": kafka})


def remove_state(layout: DataflowLayout, keep: Iterable[Source] = ()) -> None:
    """Remove a dataflow's state and its sink's contents (it starts over).

    The logs of the sources in ``keep`` that were read with the same settings stay: their
    ingested collections hold what was read, and may have been released upstream since —
    up to their recorded upper (anything after it is read from the upstream again).
    """
    kept = {
        source.name
        for source in keep
        if _reads_alike(
            (logs := layout.source_logs(source.name)).child(SOURCE_FILE).read_text_or_none(),
            source,
        )
        and IngestedCollection(logs.child(INGESTED_DIR)).truncate()
    }
    for name in layout.root.list(directories=True) + layout.root.list():
        if name != "sources":
            layout.root.child(name).delete()
    for name in layout.root.child("sources").list(directories=True):
        if name not in kept:
            layout.root.child("sources", name).delete()
    if layout.sink is not None:
        layout.sink.delete()
