"""The ``SPARK_HOME`` the driver JVM starts with: one whose Python workers import the
installed, byte-compiled pyspark instead of compiling ``pyspark.zip`` at every start.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on every Python worker's
``PYTHONPATH``. That archive holds sources only, so a worker started on its own
(not forked from a daemon) compiles each pyspark module it imports. A replica starts
two such workers for every new query: the streaming source runner of each Python
source and the pre-init runner that plans each ``transformWithStateInPandas`` operator.
Measured on this project's 2-core machine: importing the pre-init runner's module took
0.78 s from the archive, 0.17 s from site-packages.

When pyspark is pip-installed (``SPARK_HOME`` is the ``pyspark`` package itself) and
the workers run this interpreter, the archive and site-packages hold the same files:
the JVM is then started with a *shadow* home, a folder of symbolic links to every entry
of the real one except ``python/lib/pyspark.zip``. Anything else (a Spark distribution,
workers on another interpreter, no folder to make the shadow in) keeps the real home.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path

import pyspark

from dataflow_operator.logs import get_logger

__all__ = ["ARCHIVE", "driver_spark_home", "shadow_home"]

log = get_logger(__name__)

ARCHIVE = Path("python", "lib", "pyspark.zip")
"""Where a Spark home keeps the archive Spark puts first on the workers' path."""


def _same_interpreter(python: str | None) -> bool:
    """True when workers started as ``python`` run this process's interpreter."""
    if not python:
        return False
    found = shutil.which(python)
    return found is not None and os.path.abspath(found) == os.path.abspath(sys.executable)


def _link_all(source: Path, target: Path, skip: Path) -> None:
    """Link every entry of ``source`` into ``target``, descending along ``skip`` only."""
    target.mkdir()
    for entry in source.iterdir():
        if skip.parts and entry.name == skip.parts[0]:
            if len(skip.parts) > 1 and entry.is_dir():
                _link_all(entry, target / entry.name, Path(*skip.parts[1:]))
            continue
        (target / entry.name).symlink_to(entry)


def _own_folder(path: Path) -> bool:
    """True when ``path`` is a folder (not a link) this user owns: a folder of the same
    name made by someone else in a shared temporary folder is never used."""
    try:
        status = path.lstat()
    except FileNotFoundError:
        return False
    if not stat.S_ISDIR(status.st_mode) or status.st_uid != os.getuid():
        raise FileExistsError(f"{path} exists and is not this user's folder")
    return True


def shadow_home(real: Path, parent: Path) -> Path:
    """The shadow of ``real`` (every entry but :data:`ARCHIVE`) under ``parent``: made
    once, then reused (its name says which home and pyspark version it shadows)."""
    key = hashlib.sha256(f"{real}\0{pyspark.__version__}".encode()).hexdigest()[:16]
    shadow = parent / f"dataflow-spark-home-{os.getuid()}-{key}"
    if _own_folder(shadow):
        return shadow
    building = Path(tempfile.mkdtemp(prefix=f"{shadow.name}.", dir=parent))
    try:
        _link_all(real, building / "home", ARCHIVE)
        try:
            (building / "home").rename(shadow)
        except OSError:
            if not _own_folder(shadow):  # not another process's shadow made meanwhile
                raise
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return shadow


def driver_spark_home() -> str | None:
    """The ``SPARK_HOME`` to start the driver JVM with (see the module docstring), or
    ``None`` to keep the real one."""
    installed = Path(pyspark.__file__).resolve().parent
    real = Path(os.environ.get("SPARK_HOME") or installed).resolve()
    if real != installed or not (real / ARCHIVE).is_file():
        return None  # not a pip-installed pyspark: the archive may differ from it
    if not _same_interpreter(os.environ.get("PYSPARK_PYTHON")):
        return None  # the workers' interpreter may lack an installed pyspark
    for parent in _parents():
        try:
            parent.mkdir(parents=True, exist_ok=True)
            return str(shadow_home(real, parent))
        except OSError as error:
            log.debug("no shadow Spark home here", folder=str(parent), error=str(error))
    return None  # the workers compile pyspark.zip


def _parents() -> list[Path]:
    """Where a shadow may be made: the user's cache folder first (the JVM opens jars
    through the shadow for as long as it runs, and temporary folders get cleaned up),
    else the temporary folder."""
    parents = [Path(tempfile.gettempdir())]
    cache = os.environ.get("XDG_CACHE_HOME")
    try:
        cache_folder = Path(cache) if cache else Path.home() / ".cache"
    except RuntimeError:  # no home folder known (a user id without a passwd entry)
        return parents
    if cache_folder.is_absolute():
        parents.insert(0, cache_folder / "dataflow-operator")
    return parents
