"""The state location a command is given, made before Spark starts: a directory that
cannot be made is one line naming it and why, not a traceback from inside the engine."""

from __future__ import annotations

import os
from pathlib import Path

from dataflow_operator.runtime.storage import Location, StorageError

__all__ = ["state_dir_problem"]


def state_dir_problem(state_dir: str, option: str) -> str | None:
    """Why the local state directory ``state_dir`` cannot be made (``option`` names where it
    was given), or None once it exists. An object-store location is left to the engine."""
    try:
        location = Location.of(state_dir)
    except StorageError as error:
        return f"{option} {state_dir}: {error}"
    path = location.local_path
    if path is None:
        return None
    try:
        location.make_dirs()
    except OSError as error:
        reason = _reason(path, error)
        return f"{option} {state_dir}: cannot create it: {reason}; choose one you can write to"
    return None


def _reason(path: Path, error: OSError) -> str:
    """The blocking ancestor when one is a file, else the system's reason and the
    directory it could not be created in."""
    for ancestor in [path, *path.parents]:
        if ancestor.exists():
            if not ancestor.is_dir():
                return f"{ancestor} is a file, not a directory"
            said = os.strerror(error.errno) if error.errno else str(error)
            return f"{said} (in {ancestor})"
    return str(error)
