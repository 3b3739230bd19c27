"""The package's layout stays what the README says: small modules, rooms that are named."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "operator" / "dataflow_operator"


@pytest.mark.parametrize("layer", ["controller", "runtime"])
def test_the_readme_layout_names_every_subpackage(layer: str) -> None:
    readme = (ROOT / "README.md").read_text()
    row = next(
        line
        for line in readme.splitlines()
        if line.startswith(f"| `operator/dataflow_operator/{layer}/` |")
    )
    subpackages = sorted(path.parent.name for path in (PACKAGE / layer).glob("*/__init__.py"))
    missing = [name for name in subpackages if f"`{name}/`" not in row]
    assert not missing, f"README's layout row for {layer}/ does not name {missing}"


def test_every_subpackage_says_what_it_holds() -> None:
    undocumented = [
        str(init.parent.relative_to(PACKAGE))
        for init in PACKAGE.rglob("__init__.py")
        if not init.read_text().lstrip().startswith('"""')
    ]
    assert not undocumented, f"packages without a docstring: {undocumented}"
