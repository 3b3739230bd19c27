"""What Spark's per-query Python runners unpickle stays light to import.

The pre-init runner unpickles each stateful processor in a new Python process at every
query start (in the first batch's planning) only to call its ``init``; the streaming
source runner unpickles a source's reader in a new process at every query start too,
before the first batch."""

from __future__ import annotations

import pytest
from tests.fresh_imports import packages_imported_by

HEAVY = ("pandas", "numpy", "pyarrow", "sqlglot", "pydantic")
"""What the runner does not import itself, and a processor's ``init`` does not need."""


@pytest.mark.parametrize(
    "module",
    [
        "dataflow_operator.runtime.strategies.temporal_filter",
        "dataflow_operator.runtime.strategies.aggregate",
        "dataflow_operator.runtime.strategies.arrangement",
        "dataflow_operator.runtime.strategies.row_counts",
        "dataflow_operator.runtime.strategies.top_n_rows",
        "dataflow_operator.runtime.strategies.session_rows",
    ],
)
def test_the_pre_init_runner_imports_nothing_heavy_for_a_processor(module: str) -> None:
    imported = packages_imported_by(
        module, after="pyspark.sql.streaming.transform_with_state_driver_worker"
    )
    assert not imported & set(HEAVY), f"{module} imports {sorted(imported & set(HEAVY))}"


def test_the_source_runner_imports_no_sqlglot_or_logging_for_a_table_source() -> None:
    imported = packages_imported_by(
        "dataflow_operator.runtime.sources.reader",
        after="pyspark.sql.streaming.python_streaming_source_runner",
    )
    assert not imported & {"sqlglot", "pydantic", "structlog"}, sorted(imported)
