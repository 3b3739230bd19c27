"""The package's layout stays readable: small modules, subpackages that say what they hold.

That ``docs/architecture.md``'s layout table names every subpackage is checked in
``tests/test_docs.py``.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "operator" / "dataflow_operator"


def test_every_subpackage_says_what_it_holds() -> None:
    undocumented = [
        str(init.parent.relative_to(PACKAGE))
        for init in PACKAGE.rglob("__init__.py")
        if not init.read_text().lstrip().startswith('"""')
    ]
    assert not undocumented, f"packages without a docstring: {undocumented}"
