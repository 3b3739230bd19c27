"""The strategies' own helper columns, named once.

They live only inside a strategy's plan (between its stages and in its state) and never
reach a sink; the changelog's own columns (``__time``, ``__diff``) are
:mod:`dataflow_operator.core.changelog`'s. Light to import: processors import it.
"""

from __future__ import annotations

__all__ = ["BUCKET", "KEY", "ROW", "SIDE"]

SIDE = "__side"
"""Which input of a join or set operation an update comes from."""
KEY = "__key"
"""What updates are matched by, serialized as one value: a join's key; in a recompute,
the whole output row."""
ROW = "__row"
"""A whole row serialized as one value."""
BUCKET = "__bucket"
"""The partition of the state an update is routed to."""
