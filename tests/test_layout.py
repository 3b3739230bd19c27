"""The package's layout stays readable: small modules, subpackages that say what they hold.

That ``docs/architecture.md``'s layout table names every subpackage is checked in
``tests/test_docs.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "operator" / "dataflow_operator"
MAX_LINES = 400


@pytest.mark.parametrize("layer", ["controller", "runtime"])
def test_no_module_is_over_400_lines(layer: str) -> None:
    too_long = {
        str(path.relative_to(PACKAGE)): lines
        for path in (PACKAGE / layer).rglob("*.py")
        if (lines := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not too_long, f"split these modules (over {MAX_LINES} lines): {too_long}"


def test_every_subpackage_says_what_it_holds() -> None:
    undocumented = [
        str(init.parent.relative_to(PACKAGE))
        for init in PACKAGE.rglob("__init__.py")
        if not init.read_text().lstrip().startswith('"""')
    ]
    assert not undocumented, f"packages without a docstring: {undocumented}"
