"""The driver JVM's class archive: Spark's classes loaded once, mapped at every start.

A Spark driver loads and links thousands of classes before its first query runs.
HotSpot can archive the classes a run
loaded (class data sharing: a *dynamic archive*, written by ``-XX:ArchiveClassesAtExit``
when the JVM exits) and map that file at the next start instead of loading them again
(``-XX:SharedArchiveFile``), which makes a session's start and its first queries
markedly faster (``bench/RESULTS.md``).

The archive is used when it exists at :func:`archive_path`: ``$DATAFLOW_CLASS_ARCHIVE``
(``off`` turns it off), else :func:`default_archive_path`, in the user's cache folder.
``dataflow-operator class-archive`` writes it
(:mod:`dataflow_operator.runtime.cli.class_archive`); the image writes it at build time.
An archive made by another JVM or for another class path is ignored by the JVM, which
then starts as it would without one: it never changes what Spark does, only how fast
it starts. Only the driver uses it: an executor's class path is another one.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path

import pyspark

__all__ = ["ARCHIVE_ENV", "OFF", "QUIET", "archive_options", "archive_path", "default_archive_path"]

ARCHIVE_ENV = "DATAFLOW_CLASS_ARCHIVE"
"""The archive's path, or :data:`OFF`; unset or empty: :func:`default_archive_path`."""
OFF = "off"

QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
"""The JVM's notes on archives (one it cannot use, the classes it leaves out of one it
writes) go to stdout, where ``run`` prints a Subscribe's lines: silenced."""


def default_archive_path(env: Mapping[str, str] | None = None) -> Path | None:
    """``$XDG_CACHE_HOME`` (else ``~/.cache``) ``/dataflow-operator/spark-classes-V-K.jsa``
    (V: pyspark's version, K: a digest of where it is installed, since an archive holds
    the paths of the jars it was made from); ``None`` when no absolute cache folder is
    known."""
    env = os.environ if env is None else env
    cache = env.get("XDG_CACHE_HOME")
    try:
        folder = Path(cache) if cache else Path.home() / ".cache"
    except RuntimeError:  # no home folder known (a user id without a passwd entry)
        return None
    if not folder.is_absolute():
        return None
    installed = os.path.dirname(os.path.realpath(pyspark.__file__))
    key = hashlib.sha256(installed.encode()).hexdigest()[:12]
    return folder / "dataflow-operator" / f"spark-classes-{pyspark.__version__}-{key}.jsa"


def archive_path(env: Mapping[str, str] | None = None) -> Path | None:
    """Where the driver's archive is (or would be written); ``None`` when turned off."""
    env = os.environ if env is None else env
    given = env.get(ARCHIVE_ENV, "").strip()
    if given.lower() == OFF:
        return None
    return Path(given).expanduser() if given else default_archive_path(env)


def archive_options(path: Path | None) -> str:
    """The JVM options that map the archive at ``path``; empty when there is no file
    there (the JVM would then start without even its own base archive)."""
    if path is None or not path.is_file():
        return ""
    return f"-XX:SharedArchiveFile={path} -Xshare:auto {QUIET}"
