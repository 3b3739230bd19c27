"""JSON text that Spark wrote of a row, read with its numbers exact.

A fractional number becomes a :class:`~decimal.Decimal` of the digits Spark wrote, not a
float. One decoder serves every call: ``json.loads`` with an option builds a decoder
each time, which costs more than reading a short row. The standard library only: the
processors that use it are unpickled at every query start.
"""

from __future__ import annotations

import json
from decimal import Decimal

__all__ = ["decode_exact"]

decode_exact = json.JSONDecoder(parse_float=Decimal).decode
"""The value of one JSON text; raises ``ValueError`` when it is not JSON."""
