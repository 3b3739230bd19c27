"""Consumed source input released upstream, and the ingested collections compacted.

After a step, the engine hands :class:`Releaser` every reader of a ``files``,
``changelog`` or ``table`` source. For each it finds the source's offset in the batch
Spark committed last (the offset log carries the source's index): the ingested
collection holds everything read below it, durably, so

- the **resumption frontier** is that batch's upper, and the **offset resumption
  frontier** the files read by then (:mod:`dataflow_operator.core.resumption`);
- the ingested collection records it as its upper and is compacted below it
  (:meth:`IngestedCollection.compact`);
- a directory with ``cleanSource: Archive`` or ``Delete`` releases the files that
  **every** reader of it on this replica has read below its frontier — a directory read by
  two dataflows only past the slower. A reader that has committed nothing holds all back.
- a ``table``'s such files are folded into the table's next fold, :data:`FOLD_FILES` or
  more at a time (any number at a forced release), and removed from its directory: a
  table's rows all stay live, and a reader that has not read them, here or on another
  replica, reads them from the fold
  (:mod:`dataflow_operator.runtime.sources.table_folds`), so no cluster meet is needed.

The dataflows' own output changelogs (runtime-owned: not a MaterializedView's
``sink.path``, which is the user's) are compacted too (:mod:`.output_compaction`).

A ``kafka`` source has an ingested collection too; it commits its consumer group's
offsets at its offset resumption frontier instead of releasing files (:mod:`.kafka_commit`).

A failed release or commit is a warning, a count in the source's report (and its metric)
and a retry at the next release; it never stops a dataflow.

Replicas of a cluster ingest on their own, so one may not release what another still
needs. Each committed offset says when the listing it reflects was taken (``listed``):
every file in the directory then has been read. A file is released only once it was
listed at or before the **cluster's** listing frontier — the meet over every replica,
which the operator collects from their reports and sends back (``PUT /release``). A local
``run`` is its own cluster and uses its own.
"""

from __future__ import annotations

import time as wall
from collections.abc import Sequence
from dataclasses import dataclass, field

from dataflow_operator.api.dataflow import (
    CleanSource,
    DataflowSpec,
    Source,
    SourceKind,
    SourceStatus,
)
from dataflow_operator.core.kafka import partition_resumption, upstream_lag
from dataflow_operator.core.resumption import (
    RemapEntry,
    offset_resumption,
    releasable,
    resumption_frontier,
)
from dataflow_operator.core.time import Frontier
from dataflow_operator.logs import get_logger
from dataflow_operator.runtime.changelog_store import ChangelogStore
from dataflow_operator.runtime.engine.committed import Committed, committed_offsets
from dataflow_operator.runtime.engine.kafka_commit import GroupCommitter, write_positions
from dataflow_operator.runtime.engine.layout import DataflowLayout
from dataflow_operator.runtime.engine.output_compaction import compact_output, downstream_positions
from dataflow_operator.runtime.errors import one_line
from dataflow_operator.runtime.sources.ingested import (
    IngestedCollection,
    IngestedSize,
    IngestedUpper,
)
from dataflow_operator.runtime.sources.kafka import READ_ERROR_FILE
from dataflow_operator.runtime.sources.logs import (
    INGESTED_DIR,
    TABLE_SUFFIX,
    read_listing,
    read_skipped,
)
from dataflow_operator.runtime.sources.table_folds import fold_table
from dataflow_operator.runtime.storage import Location

__all__ = ["HOLDING", "Installed", "Releaser", "SourceReader", "release_all"]

log = get_logger(__name__)

INGESTING = (SourceKind.TABLE, SourceKind.FILES, SourceKind.CHANGELOG, SourceKind.KAFKA)
"""Kinds with an ingested collection."""
HOLDING = (SourceKind.CHANGELOG, SourceKind.KAFKA)
"""Kinds with their own times, which hold input at or past the expiration back."""
RELEASE_INTERVAL = 1.0
"""Seconds between releases (a step may be a tenth of that)."""
IDLE_RELEASE_INTERVAL = 10.0
"""Seconds between releases while nothing changed: no batch ran and the cluster's
frontiers did not move (see :meth:`Releaser.changed`): an idle replica's dataflows
cost no release work every second."""
FOLD_FILES = 32
"""A table's consumed files a fold waits for (each rewrites the table's fold)."""


@dataclass(frozen=True, slots=True)
class SourceReader:
    """One dataflow's reading of one source."""

    dataflow: str
    source: Source
    index: int
    """The source's position in the dataflow's spec."""
    logs: Location
    """The source's logs in the dataflow's state (files read, ingested collection)."""
    checkpoint: Location
    cluster: str = ""
    """The dataflow's cluster (a kafka source's default consumer group names it)."""

    @property
    def directory(self) -> Location | None:
        """The directory it reads (``None`` for a kind without files)."""
        settings = self.source.table or self.source.files or self.source.changelog
        return None if settings is None else Location.of(settings.path)

    @property
    def clean(self) -> tuple[CleanSource, str | None]:
        """Its ``cleanSource`` and ``archivePath`` (``Off`` for a table: it is folded)."""
        settings = self.source.files or self.source.changelog
        return self.source.clean_source, None if settings is None else settings.archive_path


@dataclass
class _Progress:
    committed: Committed | None = None
    recorded: Committed | None = None
    released: int = 0
    failures: int = 0
    error: str | None = None
    size: IngestedSize | None = None
    sized_at: float = field(default=-1e9)
    offsets: dict[int, int] = field(default_factory=dict)
    group: dict[int, int] = field(default_factory=dict)
    lag: int | None = None
    read_error: str | None = None


class Releaser:
    """Releases and compacts after steps; see the module docstring."""

    def __init__(self, *, own_cluster: bool) -> None:
        self.own_cluster = own_cluster
        self.cluster: dict[tuple[str, str], int] = {}
        """``(dataflow, source)`` → the cluster's listing frontier, as the operator sent
        it: files listed at or before it are read on every replica of the cluster."""
        self.cluster_offsets: dict[tuple[str, str], dict[int, int]] = {}
        """``(dataflow, source)`` → a kafka source's positions read on every replica."""
        self.groups = GroupCommitter()
        self._progress: dict[str, dict[str, _Progress]] = {}
        """Dataflow → source → what was last seen of it."""
        self._skipped: set[tuple[str, str]] = set()
        """``(directory, file)`` of the tables' skipped files already warned of."""
        self._last = -1e9
        self._changed = True

    def changed(self) -> None:
        """Something a release looks at may have moved: a batch ran, or the cluster's
        frontiers came. The next release is then due :data:`RELEASE_INTERVAL` after the
        last, not :data:`IDLE_RELEASE_INTERVAL`."""
        self._changed = True

    def due(self, *, force: bool = False) -> bool:
        """Whether a release is due now (a second after the last when something
        :meth:`changed` since, else ten; at once with ``force``); if so, it counts as
        done. Ask before gathering the readers."""
        now = wall.monotonic()
        interval = RELEASE_INTERVAL if self._changed else IDLE_RELEASE_INTERVAL
        if not force and now - self._last < interval:
            return False
        self._last = now
        self._changed = False
        return True

    def step(self, readers: Sequence[SourceReader], *, force: bool = False) -> None:
        """Compact and release for ``readers``; ``force`` also measures every collection."""
        now = wall.monotonic()
        readers = [r for r in readers if r.source.kind in INGESTING]
        consumed: dict[str, list[tuple[SourceReader, list[str]]]] = {}
        for reader in readers:
            progress = self._of(reader)
            progress.committed = committed_offsets(reader.checkpoint).get(reader.index)
            ingested = IngestedCollection(reader.logs.child(INGESTED_DIR))
            if progress.committed is not None and progress.committed != progress.recorded:
                # Recorded before anything is released: a dataflow that starts over on
                # this collection reads the upstream only past it.
                committed = progress.committed
                if reader.source.kafka is not None:  # where the upstream resumes, first
                    write_positions(reader.logs, committed.seq, committed.positions)
                ingested.write_upper(IngestedUpper(committed.seq, committed.upper))
                progress.recorded = committed
            frontier, seq = _resumption(progress)
            if frontier.lower is not None and seq:
                compacted = ingested.compact(seq, frontier.lower - 1)
                if compacted or now - progress.sized_at > 10 * RELEASE_INTERVAL or force:
                    progress.size, progress.sized_at = ingested.size(), now
            if reader.source.kafka is not None:
                self._commit_group(reader, progress, frontier)
                continue
            directory = reader.directory
            assert directory is not None
            if reader.source.table is not None:
                self._warn_skipped(reader, directory)
            done: list[str] = []
            if reader.source.table is not None or reader.source.clean_source is not CleanSource.OFF:
                listed_by = self._listing_frontier(reader, progress.committed)
                listing = read_listing(reader.logs)[:seq]
                done = [name for name, listed in listing if listed <= listed_by]
            consumed.setdefault(directory.uri, []).append((reader, done))
        for group in consumed.values():
            if all(reader.source.table is not None for reader, _ in group):
                self._fold(group, force=force)
            else:
                self._release(group)

    def _warn_skipped(self, reader: SourceReader, directory: Location) -> None:
        """One warning per file of a table's directory that its readers skip (not rows)."""
        for name in read_skipped(reader.logs):
            if (directory.uri, name) not in self._skipped:
                self._skipped.add((directory.uri, name))
                log.warning(
                    f"table file skipped: only {TABLE_SUFFIX} files are rows of a table",
                    file=str(directory.child(name)),
                    dataflow=reader.dataflow,
                    source=reader.source.name,
                )

    def _of(self, reader: SourceReader) -> _Progress:
        flows = self._progress.setdefault(reader.dataflow, {})
        return flows.setdefault(reader.source.name, _Progress())

    def _commit_group(self, reader: SourceReader, progress: _Progress, frontier: Frontier) -> None:
        """Commit a kafka source's consumer group at its offset resumption frontier (on a
        cluster: its meet with the other replicas'); a failure is counted and retried."""
        progress.read_error = reader.logs.child(READ_ERROR_FILE).read_text_or_none()
        recorded, committed = progress.recorded, progress.committed
        if recorded is None or committed is None:
            return  # nothing committed yet: all input is still needed
        durable = [(d.positions, d.upper) for d in (recorded, committed)]
        progress.offsets = partition_resumption(durable, frontier)
        progress.lag = upstream_lag(committed.positions, committed.highs)
        key = (reader.dataflow, reader.source.name)
        meet = progress.offsets if self.own_cluster else self.cluster_offsets.get(key)
        try:
            found = self.groups.commit_source(
                reader.source, reader.cluster, key, progress.offsets, meet
            )
            progress.group, progress.error = found or progress.group, None
        except Exception as failure:
            progress.failures, progress.error = progress.failures + 1, one_line(failure)
            log.warning("consumer group offsets not committed; retrying", error=progress.error)

    def _listing_frontier(self, reader: SourceReader, committed: Committed | None) -> int:
        """Files listed at or before this time are read wherever they must be: on this
        replica (its own cluster, or a table: a fold is read by those that did not read
        its files), or on every replica of the cluster (the operator's meet); -1 when
        nothing may be released."""
        if committed is None:
            return -1
        if self.own_cluster or reader.source.table is not None:
            return committed.listed
        return min(committed.listed, self.cluster.get((reader.dataflow, reader.source.name), -1))

    def _fold(self, group: list[tuple[SourceReader, list[str]]], *, force: bool) -> None:
        """Fold a table's files that every reader has read (see the module docstring)."""
        directory = group[0][0].directory
        assert directory is not None
        names = sorted(releasable([files for _, files in group]) & set(directory.list()))
        if not names or (len(names) < FOLD_FILES and not force):
            return
        try:
            folded, error = fold_table(directory, names), None
        except OSError as failure:
            folded, error = 0, f"fold {directory}: {failure}"
            log.warning("table files not folded; retrying", error=error)
        self._count(group, folded, error)

    def _count(
        self, group: list[tuple[SourceReader, list[str]]], released: int, error: str | None
    ) -> None:
        """Count what a release did for each reader of the directory."""
        for reader, _ in group:
            progress = self._of(reader)
            progress.released += released
            if error is not None:
                progress.failures += 1
                progress.error = error
            elif released:
                progress.error = None

    def _release(self, group: list[tuple[SourceReader, list[str]]]) -> None:
        settings = {reader.clean for reader, _ in group}
        if len(settings) != 1:
            return  # readers disagree on what to do with the files: keep them
        clean, archive = settings.pop()
        if clean is CleanSource.OFF:
            return
        directory = group[0][0].directory
        assert directory is not None
        present = set(directory.list())
        names = sorted(releasable([files for _, files in group]) & present)
        released, error = 0, None
        for name in names:
            try:
                file = directory.child(name)
                if clean is CleanSource.DELETE:
                    file.delete()
                else:
                    assert archive is not None
                    file.move_to(Location.of(archive).child(name))
                released += 1
            except OSError as failure:
                error = f"{clean.value.lower()} {name}: {failure}"
                break
        self._count(group, released, error)
        if error is not None:
            log.warning(
                "source input not released; retrying",
                directory=str(directory),
                error=error,
                dataflows=sorted({reader.dataflow for reader, _ in group}),
            )

    def reports(self, dataflow: str) -> list[SourceStatus]:
        """The sources of ``dataflow`` that ingest files, as last seen."""
        reports = []
        for source, progress in sorted(self._progress.get(dataflow, {}).items()):
            committed = progress.committed
            size = progress.size or IngestedSize(0, 0, 0)
            frontier, offset = _resumption(progress)
            reports.append(
                SourceStatus(
                    name=source,
                    resumption_frontier=frontier.elements(),
                    listed=None if committed is None else committed.listed,
                    offset=offset,
                    released_files=progress.released,
                    ingested_rows=size.rows,
                    ingested_bytes=size.bytes,
                    release_failures=progress.failures,
                    last_release_error=progress.error,
                    offsets={str(p): o for p, o in progress.offsets.items()} or None,
                    committed_offsets={str(p): o for p, o in progress.group.items()} or None,
                    upstream_lag=progress.lag,
                    last_read_error=progress.read_error,
                )
            )
        return reports

    def forget(self, dataflow: str) -> None:
        """Drop what is known of a dataflow that is no longer installed."""
        self._progress.pop(dataflow, None)


def _resumption(progress: _Progress) -> tuple[Frontier, int]:
    """A source's timestamp resumption frontier — the meet of the uppers of what a restart
    needs: its ingested collection (as recorded) and the offset log (as committed) — and
    that time as an offset, through the same two entries of the remap."""
    durable = [d for d in (progress.recorded, progress.committed) if d is not None]
    if len(durable) < 2:
        return Frontier.minimum(), 0  # nothing durable yet: all input is still needed
    frontier = resumption_frontier(Frontier.at(d.upper) for d in durable)
    return frontier, offset_resumption([RemapEntry(d.seq, d.upper) for d in durable], frontier)


@dataclass(frozen=True, slots=True)
class Installed:
    """An installed dataflow, as the release sees it."""

    name: str
    spec: DataflowSpec
    layout: DataflowLayout
    output: ChangelogStore | None
    """Its output changelog when it runs and the runtime owns it (not a ``sink.path``)."""


def release_all(releaser: Releaser, installed: Sequence[Installed], *, force: bool) -> None:
    """One release over a replica's dataflows: its sources' input, its outputs' history."""
    readers = [
        SourceReader(
            dataflow=dataflow.name,
            source=source,
            index=index,
            logs=dataflow.layout.source_logs(source.name),
            checkpoint=dataflow.layout.checkpoint,
            cluster=dataflow.spec.cluster,
        )
        for dataflow in installed
        for index, source in enumerate(dataflow.spec.sources)
    ]
    releaser.step(readers, force=force)
    for dataflow in installed:
        if dataflow.output is not None:
            compact_output(
                dataflow.output,
                downstream_positions([(d.spec, d.layout) for d in installed], dataflow.name),
            )
