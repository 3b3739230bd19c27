"""What Spark's per-query Python runners unpickle stays light to import.

The pre-init runner unpickles each stateful processor in a new Python process at every
query start (in the first batch's planning) only to call its ``init``; the streaming
source runner unpickles a source's reader in a new process at every query start too,
before the first batch."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("pandas", "numpy", "pyarrow", "sqlglot", "pydantic")
"""What the runner does not import itself, and a processor's ``init`` does not need."""


@pytest.mark.parametrize(
    "module",
    [
        "dataflow_operator.runtime.strategies.temporal_filter",
        "dataflow_operator.runtime.strategies.aggregate",
        "dataflow_operator.runtime.strategies.arrangement",
        "dataflow_operator.runtime.strategies.row_counts",
    ],
)
def test_the_pre_init_runner_imports_nothing_heavy_for_a_processor(module: str) -> None:
    code = (
        "import sys\n"
        "import pyspark.sql.streaming.transform_with_state_driver_worker\n"
        "before = set(sys.modules)\n"
        f"import {module}\n"
        f"print(' '.join(sorted({{m.split('.')[0] for m in set(sys.modules) - before}})))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    imported = set(result.stdout.split())
    assert not imported & set(HEAVY), f"{module} imports {sorted(imported & set(HEAVY))}"


def test_the_source_runner_imports_no_sqlglot_or_logging_for_a_table_source() -> None:
    code = (
        "import sys\n"
        "import pyspark.sql.streaming.python_streaming_source_runner\n"
        "before = set(sys.modules)\n"
        "import dataflow_operator.runtime.sources.reader\n"
        "print(' '.join(sorted({m.split('.')[0] for m in set(sys.modules) - before})))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    imported = set(result.stdout.split())
    assert not imported & {"sqlglot", "pydantic", "structlog"}, sorted(imported)
