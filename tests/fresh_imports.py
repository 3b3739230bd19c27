"""What importing a module loads, seen in a new Python process."""

from __future__ import annotations

import subprocess
import sys


def modules_imported_by(module: str, after: str | None = None) -> set[str]:
    """The modules that ``import module`` loads in a new interpreter (``after`` imported
    first, and what it loads left out)."""
    code = (
        "import sys\n"
        + (f"import {after}\n" if after else "")
        + "before = set(sys.modules)\n"
        + f"import {module}\n"
        + "print(' '.join(sorted(set(sys.modules) - before)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    return set(result.stdout.split())


def packages_imported_by(module: str, after: str | None = None) -> set[str]:
    """The top-level packages of :func:`modules_imported_by`."""
    return {name.split(".")[0] for name in modules_imported_by(module, after)}
