"""The two columns every changelog relation ends with.

Kept apart from the SQL planners (:mod:`dataflow_operator.core.sql_shape` re-exports
them) so that what runs in Spark's Python workers — the source readers, the changelog
store — names them without importing a SQL parser.
"""

from __future__ import annotations

__all__ = ["DIFF", "RESERVED_PREFIX", "TIME", "reserved_column_problem"]

TIME = "__time"
"""Column of every changelog relation: the update's logical time (BIGINT epoch ms)."""

DIFF = "__diff"
"""Column of every changelog relation: the update's multiplicity change (BIGINT)."""

RESERVED_PREFIX = "__"
"""Columns the runtime adds to a relation (``__time``, ``__diff``, an aggregate's
``__count``…) begin with it; a source's own columns may not."""


def reserved_column_problem(name: str) -> str | None:
    """Why a source's column may not be named ``name`` (a reserved name), or None."""
    if name.startswith(RESERVED_PREFIX):
        return (
            f'column "{name}": names beginning with "{RESERVED_PREFIX}" are reserved for the '
            f"runtime's own columns ({TIME}, {DIFF}, …); rename it"
        )
    return None
