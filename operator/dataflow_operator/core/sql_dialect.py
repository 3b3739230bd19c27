"""The SQL dialect the project parses with: sqlglot's Spark dialect, as lenient as Spark.

The planner's parser may not be stricter than Spark's own: SQL that Spark runs must parse
here. Where sqlglot's Spark dialect refuses SQL that Spark accepts, :class:`SparkSql` mends
it; each mend is named below.
"""

from __future__ import annotations

from typing import Any, cast

from sqlglot import TokenType, exp
from sqlglot.dialects.spark import Spark

__all__ = ["SparkSql"]

_SparkParser: Any = Spark.Parser
"""Spark's parser class (an alias in newer sqlglot, which mypy does not take as a base)."""


class SparkSql(Spark):
    """Spark's dialect, with ``GROUP BY window(...)`` as its first grouping item.

    sqlglot stops a GROUP BY list at a query modifier keyword, and ``WINDOW`` is one (the
    named-window clause), so ``GROUP BY window(ts, '10 seconds')`` failed with "Expecting )"
    while ``GROUP BY a, window(...)`` parsed. A ``WINDOW`` followed by ``(`` is a call of
    Spark's ``window`` function, never the clause (whose name comes before ``AS``).
    """

    class Parser(_SparkParser):  # type: ignore[misc]
        def _parse_group(self, skip_group_by_token: bool = False) -> exp.Group | None:
            first = self._index if skip_group_by_token else self._index + 1
            if (
                self._token_type_at(first) == TokenType.WINDOW
                and self._token_type_at(first + 1) == TokenType.L_PAREN
            ):
                self.QUERY_MODIFIER_TOKENS = _SparkParser.QUERY_MODIFIER_TOKENS - {TokenType.WINDOW}
                try:
                    return cast("exp.Group | None", super()._parse_group(skip_group_by_token))
                finally:
                    del self.QUERY_MODIFIER_TOKENS
            return cast("exp.Group | None", super()._parse_group(skip_group_by_token))

        def _token_type_at(self, index: int) -> TokenType | None:
            tokens = self._tokens
            return cast("TokenType", tokens[index].token_type) if index < len(tokens) else None
