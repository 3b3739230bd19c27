"""What the engine's builder refuses before it asks Spark for anything."""

from __future__ import annotations

from typing import Any, cast

import pytest

from dataflow_operator.core.errors import InvalidSql
from dataflow_operator.runtime.sources.frames import SourceInput
from dataflow_operator.runtime.strategies.build import build_dataflow

NO_SPARK = cast(Any, None)
"""The refusals come before any Spark call: a session is never touched."""


@pytest.mark.parametrize("declared", [[], ["t"]])
def test_a_query_that_reads_no_source_is_refused_with_a_line_naming_the_sql(
    declared: list[str],
) -> None:
    sources = [SourceInput(name, "id INT", {}) for name in declared]
    with pytest.raises(InvalidSql) as refused:
        build_dataflow(NO_SPARK, "SELECT 1 AS x", sources, None, None)
    assert refused.value.field == "spec.sql"
    assert str(refused.value).startswith("the query reads none of the dataflow's sources")
