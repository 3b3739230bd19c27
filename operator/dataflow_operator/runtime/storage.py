"""Locations every pod of a replica reaches: the state location, sources, sinks.

A :class:`Location` is a URI — ``file:///abs/path`` on a volume mounted at the same path
in the driver and every executor, or an object store / HDFS (``s3a://bucket/prefix``,
``gs://…``, ``abfss://…``, ``hdfs://…``). It is a plain string underneath, so it travels
to executors inside Spark's task closures and data source options, and each process
opens the filesystem itself:

- Spark's own I/O (checkpoints, RocksDB state, Parquet writers) gets :attr:`Location.uri`
  and goes through Hadoop's FileSystem (``s3a`` comes from hadoop-aws in the image);
- the runtime's Python code — source readers on executors, the changelog store, the
  clock — goes through Arrow's filesystem layer (:mod:`pyarrow.fs`) on the same URI
  (``s3a`` is read as ``s3``, with ``AWS_ENDPOINT_URL`` for S3-compatible stores such as
  MinIO). Python workers cannot reach the JVM's Hadoop FileSystem, and never use
  ``open()`` on a path an executor needs.

Relative paths are resolved once, where a location is first made (the driver), so an
executor with another working directory sees the same files.
"""

from __future__ import annotations

import functools
import io
import os
import uuid
from collections.abc import Generator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from dataflow_operator.core.names import segment_problem

__all__ = ["Location", "StorageError", "UnsafePath", "hadoop_conf"]

OBJECT_STORE_SCHEMES = ("s3a", "s3", "s3n", "gs", "gcs", "abfs", "abfss", "hdfs", "viewfs")
"""Schemes other than ``file`` that a location may have."""
ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
"""Where an S3-compatible store's endpoint comes from (MinIO, Ceph, …)."""


class StorageError(OSError):
    """A location that cannot be used (unknown scheme, unreachable store)."""


class UnsafePath(StorageError):
    """A name that would make a path leave the location it is joined to."""


@dataclass(frozen=True, slots=True)
class Location:
    """A file or directory reachable from every pod of the replica; see the module docstring."""

    uri: str

    @classmethod
    def of(cls, where: str | Path | Location) -> Location:
        """A location from a URI or a path (relative paths resolve against the cwd, here)."""
        if isinstance(where, Location):
            return where
        text = str(where)
        scheme = urlsplit(text).scheme.lower()
        if scheme == "file":
            return cls(Path(urlsplit(text).path).resolve().as_uri())
        if scheme in OBJECT_STORE_SCHEMES:
            return cls(text.rstrip("/"))
        if scheme and len(scheme) > 1:  # "C:" would be a drive, not a scheme
            raise StorageError(
                f"{text}: unsupported scheme {scheme!r} (use a path, file://, "
                f"{', '.join(s + '://' for s in OBJECT_STORE_SCHEMES[:6])}…)"
            )
        return cls(Path(text).resolve().as_uri())

    # --- naming ---------------------------------------------------------------------

    def child(self, *parts: str) -> Location:
        """A location below this one."""
        return Location("/".join([self.uri.rstrip("/"), *(p.strip("/") for p in parts)]))

    def below(self, *names: str) -> Location:
        """``child(*names)`` for names that come from users (a dataflow's, a source's):
        the result is provably under this location, or :class:`UnsafePath` is raised.

        Each name must be one path component (:func:`~dataflow_operator.core.names.
        segment_problem`: no ``..``, ``/``, NUL, empty…); a local location's result must
        also resolve (symbolic links followed) to a path under this one's.
        """
        for name in names:
            problem = segment_problem(name)
            if problem is not None:
                raise UnsafePath(f"{self}: refusing the name {name!r} below it: {problem}")
        child = self.child(*names)
        root, path = self.local_path, child.local_path
        if (
            root is not None
            and path is not None
            and not path.resolve().is_relative_to(root.resolve())
        ):
            raise UnsafePath(f"{path} resolves to {path.resolve()}, not under {root}")
        return child

    @property
    def name(self) -> str:
        """The last component."""
        return self.uri.rstrip("/").rsplit("/", 1)[-1]

    @property
    def parent(self) -> Location:
        """The location one level up."""
        return Location(self.uri.rstrip("/").rsplit("/", 1)[0])

    @property
    def local_path(self) -> Path | None:
        """The local path of a ``file://`` location, else ``None``."""
        split = urlsplit(self.uri)
        return Path(split.path) if split.scheme == "file" else None

    def __str__(self) -> str:
        local = self.local_path
        return str(local) if local is not None else self.uri

    # --- the filesystem -------------------------------------------------------------

    def _fs(self) -> tuple[pafs.FileSystem, str]:
        split = urlsplit(self.uri)
        scheme = split.scheme.lower()
        if scheme == "file":
            return _local(), split.path
        if scheme in ("s3a", "s3", "s3n"):
            return _s3(), f"{split.netloc}{split.path}"
        return _from_uri(f"{scheme}://{split.netloc}"), split.path

    # --- reading --------------------------------------------------------------------

    def exists(self) -> bool:
        """True when a file or directory is there."""
        fs, path = self._fs()
        return bool(fs.get_file_info(path).type != pafs.FileType.NotFound)

    def stamp(self) -> tuple[int, ...] | None:
        """A cheap token that changes whenever the file is written or replaced: its inode,
        modification time and size locally, the time and size elsewhere; ``None`` when
        nothing is there. For watching a small file without reading it."""
        local = self.local_path
        if local is not None:
            try:
                stat = os.stat(local)
            except OSError:
                return None
            return (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        fs, path = self._fs()
        info = fs.get_file_info(path)
        if info.type == pafs.FileType.NotFound:
            return None
        return (info.mtime_ns or 0, info.size or 0)

    def is_dir(self) -> bool:
        """True when a directory is there (an object-store prefix with objects counts)."""
        fs, path = self._fs()
        info = fs.get_file_info(path)
        if info.type == pafs.FileType.Directory:
            return True
        return self.local_path is None and bool(self.list())

    def list(self, *, directories: bool = False) -> list[str]:
        """Names of the files (or directories) directly below, sorted.

        Hidden (``.``) and in-progress (``_``) names are left out.
        """
        wanted = pafs.FileType.Directory if directories else pafs.FileType.File
        return sorted(info.base_name for info in self._listed() if info.type == wanted)

    def sizes(self) -> dict[str, int]:
        """The bytes of each file directly below, by name (one listing, as :meth:`list`)."""
        return {
            info.base_name: int(info.size or 0)
            for info in self._listed()
            if info.type == pafs.FileType.File
        }

    def _listed(self) -> tuple[pafs.FileInfo, ...]:
        fs, path = self._fs()
        try:
            infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
        except (NotADirectoryError, FileNotFoundError):
            return ()
        return tuple(info for info in infos if not info.base_name.startswith((".", "_")))

    def read_bytes(self) -> bytes:
        """The file's content."""
        fs, path = self._fs()
        with fs.open_input_stream(path) as stream:
            return bytes(stream.read())

    def read_text(self) -> str:
        """The file's content as UTF-8 text."""
        return self.read_bytes().decode("utf-8")

    def read_lines(self) -> Generator[str, None, None]:
        """The file's UTF-8 lines, read as they are consumed (never the whole file at once)."""
        with (
            self.open_stream() as stream,
            io.TextIOWrapper(stream, encoding="utf-8", newline="") as text,
        ):
            yield from text

    @contextmanager
    def open_stream(self) -> Iterator[pa.NativeFile]:
        """The file's bytes as a stream, read as they are consumed (closed on leaving)."""
        fs, path = self._fs()
        with fs.open_input_stream(path) as stream:
            yield stream

    def read_parquet_batches(
        self, columns: Sequence[str] | None = None
    ) -> Generator[pa.RecordBatch, None, None]:
        """A Parquet file's record batches (only ``columns``, if given), read as they are
        consumed."""
        fs, path = self._fs()
        with fs.open_input_file(path) as file:
            wanted = None if columns is None else list(columns)
            yield from pq.ParquetFile(file).iter_batches(columns=wanted)

    def size(self) -> int:
        """The file's size in bytes (0 when it is not there)."""
        fs, path = self._fs()
        info = fs.get_file_info(path)
        return int(info.size or 0) if info.type == pafs.FileType.File else 0

    def parquet_rows(self) -> int:
        """A Parquet file's row count, from its footer."""
        fs, path = self._fs()
        with fs.open_input_file(path) as file:
            return int(pq.ParquetFile(file).metadata.num_rows)

    def read_text_or_none(self) -> str | None:
        """The file's text, or ``None`` when it does not exist."""
        try:
            return self.read_text()
        except (FileNotFoundError, NotADirectoryError):
            return None

    def read_parquet(self) -> pa.Table:
        """A Parquet file (or a directory of them) as one table."""
        fs, path = self._fs()
        return pq.read_table(path, filesystem=fs)

    # --- writing --------------------------------------------------------------------

    def make_dirs(self) -> None:
        """Create the directory (and parents); a no-op on object stores."""
        fs, path = self._fs()
        fs.create_dir(path, recursive=True)

    def write_bytes(self, data: bytes) -> None:
        """Replace the file's content: readers see the old or the new content, never half.

        Local and HDFS files are written beside and renamed; an object-store PUT is atomic.
        """
        fs, path = self._fs()
        self.parent.make_dirs()
        if not self._renames_atomically():
            with fs.open_output_stream(path) as out:
                out.write(data)
            return
        temporary = f"{self.parent._fs()[1]}/.{self.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp"
        with fs.open_output_stream(temporary) as out:
            out.write(data)
        fs.move(temporary, path)

    def write_text(self, text: str) -> None:
        """Replace the file's text atomically (see :meth:`write_bytes`)."""
        self.write_bytes(text.encode("utf-8"))

    def write_parquet(self, table: pa.Table) -> None:
        """Write ``table`` as one Parquet file, atomically (see :meth:`write_bytes`)."""
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink)
        self.write_bytes(sink.getvalue().to_pybytes())

    def append_text(self, text: str) -> None:
        """Append to a small text file (object stores cannot append: rewritten whole)."""
        self.write_text((self.read_text_or_none() or "") + text)

    def delete(self) -> None:
        """Remove the file or the whole directory; nothing there is fine."""
        fs, path = self._fs()
        info = fs.get_file_info(path)
        if info.type == pafs.FileType.Directory:
            fs.delete_dir(path)
        elif info.type == pafs.FileType.File:
            fs.delete_file(path)
        elif self.local_path is None:
            fs.delete_dir_contents(path, missing_dir_ok=True)

    def move_to(self, target: Location) -> None:
        """Move the file to ``target`` (creating its directory); across filesystems it is
        copied, then removed here."""
        target.parent.make_dirs()
        fs, path = self._fs()
        target_fs, target_path = target._fs()
        if fs is target_fs:
            fs.move(path, target_path)
            return
        pafs.copy_files(path, target_path, source_filesystem=fs, destination_filesystem=target_fs)
        fs.delete_file(path)

    def _renames_atomically(self) -> bool:
        return urlsplit(self.uri).scheme.lower() in ("file", "hdfs", "viewfs")


def hadoop_conf(location: Location, env: Mapping[str, str]) -> dict[str, str]:
    """Spark settings that let Hadoop's FileSystem reach ``location`` as Arrow does.

    For ``s3a://`` with an ``AWS_ENDPOINT_URL`` (an S3-compatible store): that endpoint,
    path-style access, and TLS only when the endpoint is ``https``. Credentials come from
    the same environment (hadoop-aws's default chain reads ``AWS_ACCESS_KEY_ID``…).
    """
    if urlsplit(location.uri).scheme.lower() != "s3a":
        return {}
    endpoint = next((env[v] for v in ENDPOINT_VARIABLES if env.get(v)), None)
    if not endpoint:
        return {}
    return {
        "spark.hadoop.fs.s3a.endpoint": endpoint,
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": str(endpoint.startswith("https")).lower(),
    }


@functools.cache
def _local() -> pafs.FileSystem:
    return pafs.LocalFileSystem()


@functools.cache
def _s3() -> pafs.FileSystem:
    """S3 (``s3a://`` too) with the AWS default credential chain and an optional endpoint."""
    endpoint = next((os.environ[v] for v in ENDPOINT_VARIABLES if os.environ.get(v)), None)
    options: dict[str, object] = {}
    if endpoint:
        split = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
        options |= {"endpoint_override": split.netloc, "scheme": split.scheme}
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if region:
        options["region"] = region
    return pafs.S3FileSystem(**options)


@functools.cache
def _from_uri(root: str) -> pafs.FileSystem:
    try:
        fs, _ = pafs.FileSystem.from_uri(root)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as error:
        raise StorageError(f"{root}: cannot open this storage: {error}") from None
    return fs
