"""How wide the fuzz and soak cases run: their default in ``make test``, more on request.

``make test`` runs each fuzz case at its fixed regression seeds and one random example
(what every run must hold); ``DATAFLOW_TEST_WIDE=1`` (``make test-wide``) adds seeds and
examples for a longer search. Nothing that runs by default is left out of a wide run.
"""

from __future__ import annotations

import os

WIDE = os.environ.get("DATAFLOW_TEST_WIDE", "") not in ("", "0")
"""Whether this run is a wide one."""


def seeds(default: list[int], wider: list[int]) -> list[int]:
    """``default`` always; ``wider`` too in a wide run."""
    return default + wider if WIDE else default


def examples(default: int = 1, wide: int = 10) -> int:
    """Hypothesis examples per random case: ``default`` normally, ``wide`` in a wide run."""
    return wide if WIDE else default
