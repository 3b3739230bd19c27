"""The api package's names are imported on first use, so light commands stay light."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dataflow_operator import api


@pytest.mark.parametrize("name", api.__all__)
def test_every_exported_name_resolves(name: str) -> None:
    namespace: dict[str, object] = {}
    exec(f"from dataflow_operator.api import {name}", namespace)
    assert namespace[name] is getattr(api, name)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="Nope"):
        _ = api.Nope


def test_the_insert_command_does_not_build_the_models() -> None:
    code = (
        "import sys\n"
        "import dataflow_operator.runtime.cli.insert\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    imported = set(result.stdout.split())
    assert "pydantic" not in imported
    assert "dataflow_operator.api.dataflow" not in imported
