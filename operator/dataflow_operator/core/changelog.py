"""The two columns every changelog relation ends with.

Kept apart from the SQL planners (:mod:`dataflow_operator.core.sql_shape` re-exports
them) so that what runs in Spark's Python workers — the source readers, the changelog
store — names them without importing a SQL parser.
"""

from __future__ import annotations

__all__ = ["DIFF", "TIME"]

TIME = "__time"
"""Column of every changelog relation: the update's logical time (BIGINT epoch ms)."""

DIFF = "__diff"
"""Column of every changelog relation: the update's multiplicity change (BIGINT)."""
