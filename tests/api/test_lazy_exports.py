"""The api package's names are imported on first use, so light commands stay light."""

from __future__ import annotations

import pytest
from tests.fresh_imports import modules_imported_by

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
    imported = modules_imported_by("dataflow_operator.runtime.cli.insert")
    assert "pydantic" not in imported
    assert "dataflow_operator.api.dataflow" not in imported
