"""Session windows, maintained as each row's session in state: the planning half.

:func:`session_shape` recognises a GROUP BY with one ``session_window(ts, 'gap')`` key
(Nexmark's q11)::

    SELECT k, count(*), session_window.start, session_window.end
    FROM relation [WHERE …]
    GROUP BY k, session_window(ts, '10 seconds') [HAVING …]

and splits it in two. The first half, the *sessionizer*, keeps per partition (the other
``GROUP BY`` values) the rows by their time ``ts`` and gives each row its session: rows
whose times are at most the gap apart are in one session, from its first time to its
last time plus the gap (Spark's rule; a row without a time is in none). Its output is a
changelog of the rows with their session's bounds, ``__session_start`` and
``__session_end``: when a row joins two sessions into one, or its retraction splits one,
the rows of those sessions are retracted with their old bounds and inserted with their
new ones. The second half is the query as an ordinary GROUP BY over that changelog, the
session's bounds two keys among the others: ``session_window.start`` is
``__session_start``, ``session_window`` the struct of both.

Only a constant gap in hours, minutes, seconds, milliseconds or microseconds is kept so:
a gap given per row has no one length, nor has a day in a time zone with summer time. A
gap of zero or less puts no row in a session in Spark; it is left to recompute.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlglot import exp

from dataflow_operator.core.sql_shape import (
    DIFF,
    NOT_AGGREGATE_ARGS,
    TIME,
    from_table,
    is_row_wise,
    is_session_window,
    normalized,
    render,
    set_from_table,
)

__all__ = [
    "PARTITION_PREFIX",
    "SESSION_END",
    "SESSION_START",
    "SESSION_TIME",
    "SessionPlan",
    "gap_micros",
    "session_shape",
    "unkept_window",
]

SESSION_WINDOW = "session_window"
"""Spark's session window function, and the name of the column it gives a query."""
PARTITION_PREFIX = "__session_p"
"""Columns of :attr:`SessionPlan.input_sql` holding the other ``GROUP BY`` values."""
SESSION_TIME = "__session_t"
"""The column of :attr:`SessionPlan.input_sql` holding a row's time in its session."""
SESSION_START = "__session_start"
"""The sessionizer's output column: the start of a row's session (its first time)."""
SESSION_END = "__session_end"
"""The sessionizer's output column: the end of a row's session (its last time + gap)."""

_MICROS = {
    "microsecond": 1,
    "millisecond": 1_000,
    "second": 1_000_000,
    "minute": 60_000_000,
    "hour": 3_600_000_000,
}
"""The units of a gap of fixed length (a day's length depends on the time zone)."""
_PART = re.compile(r"\s*([+-]?\d+(?:\.\d+)?)\s*([a-z]+)\s*", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class SessionPlan:
    """The sessionizer of a session-window query over one input.

    ``input_sql`` is the rows to sessionize as a changelog: the relation's columns that
    the query over the sessions reads, ``__time`` and ``__diff``, then each other
    ``GROUP BY`` value as ``__session_p0``, … and the row's time as ``__session_t``, the
    query's ``WHERE`` applied. Rows are in one session when their times are at most
    ``gap`` (µs) apart. The sessionizer's output is those columns, ``__session_start``,
    ``__session_end``, ``__time`` and ``__diff``."""

    input_sql: str
    partitions: int
    gap: int


@dataclass(frozen=True, slots=True)
class SessionShape:
    """A session-window query split in two: its sessionizer and the GROUP BY over the
    sessionizer's output (``outer``, which reads it as ``relation``)."""

    plan: SessionPlan
    outer: exp.Select


def unkept_window(call: exp.Expr) -> str | None:
    """Why the sessions of ``session_window(…)`` call ``call`` are not kept in state, in
    a user's words, or ``None`` when they may be."""
    arguments = call.expressions
    if len(arguments) != 2 or not _row_wise(arguments[0]):
        return f"{render(call)} (its time is not an expression of the row)"
    gap = arguments[1]
    if not isinstance(gap, exp.Literal) or not gap.is_string:
        return f"{render(call)} (a gap that is not one constant)"
    micros = gap_micros(gap.name)
    if micros is None:
        return f"{render(call)} (a gap of no fixed length: days, months or not understood)"
    if micros <= 0:
        return f"{render(call)} (a gap of zero or less puts no row in a session)"
    return None


def gap_micros(text: str) -> int | None:
    """A session gap such as ``'10 seconds'`` or ``'1 minute 30 seconds'`` in µs, or
    ``None`` for one without a fixed length (days, months) or not understood."""
    text = text.strip()
    if text.lower().startswith("interval "):
        text = text[len("interval ") :]
    total, position = 0, 0
    while position < len(text):
        part = _PART.match(text, position)
        if part is None or part.end() == position:
            return None
        amount, unit = part.group(1), part.group(2).lower()
        unit = unit[:-1] if unit.endswith("s") else unit  # "seconds" or "second"
        if unit not in _MICROS or ("." in amount and unit != "second"):
            return None
        total += (
            round(float(amount) * _MICROS[unit]) if "." in amount else int(amount) * _MICROS[unit]
        )
        position = part.end()
    return total if position else None


def session_shape(query: exp.Query, relation: str) -> SessionShape | None:
    """``query`` as a sessionizer and a GROUP BY over its output (named ``relation``), or
    ``None`` when it is not a GROUP BY of one input with one ``session_window`` key of a
    positive constant gap."""
    if not isinstance(query, exp.Select) or query.args.get("joins"):
        return None
    if any(query.args.get(key) for key in NOT_AGGREGATE_ARGS):
        return None
    table = from_table(query, frozenset())
    group = query.args.get("group")
    if table is None or not isinstance(group, exp.Group) or _grouping_sets(group):
        return None
    calls = [key for key in group.expressions if is_session_window(key)]
    if len(calls) != 1:
        return None
    call = calls[0]
    if unkept_window(call) is not None:
        return None
    gap = gap_micros(call.expressions[1].name)
    assert gap is not None
    others = [key for key in group.expressions if key is not call]
    if any(not _row_wise(key) or _names_output(key, query) for key in others):
        return None
    outer = _over_sessions(query, call, others, table, relation)
    where = query.args.get("where")
    if outer is None or (where is not None and not _row_wise(where.this)):
        return None
    inner = exp.select(
        *_kept_columns(outer),
        *(exp.alias_(key.copy(), f"{PARTITION_PREFIX}{i}") for i, key in enumerate(others)),
        exp.alias_(call.expressions[0].copy(), SESSION_TIME),
        copy=False,
    )
    set_from_table(inner, table.copy())
    if where is not None:
        inner.set("where", where.copy())
    return SessionShape(SessionPlan(render(inner), len(others), gap), outer)


def _kept_columns(outer: exp.Select) -> list[exp.Expr]:
    """What the sessionizer keeps of each row: the columns the query over it reads (each
    once, as Spark resolves names: whatever their case), then ``__time`` and ``__diff``."""
    names: dict[str, str] = {}
    for column in outer.find_all(exp.Column):
        if column.name not in (SESSION_START, SESSION_END):
            names.setdefault(column.name.lower(), column.name)
    return [
        *(exp.column(name, quoted=True) for name in names.values()),
        *map(exp.column, (TIME, DIFF)),
    ]


def _over_sessions(
    query: exp.Select, call: exp.Expr, others: list[exp.Expr], table: exp.Table, relation: str
) -> exp.Select | None:
    """``query`` reading the sessionizer's output ``relation`` (under the input's name),
    grouped by the session's bounds for the ``session_window`` key, its ``WHERE`` gone
    (the sessionizer applied it); ``None`` where it reads the window otherwise."""
    window = normalized(call)
    unknown: list[exp.Expr] = []

    def bounds(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Dot) and normalized(node.this) == window:
            return _bound(node.expression.name, node, unknown)
        if normalized(node) == window:
            return _struct()
        if isinstance(node, exp.Column) and len(node.parts) <= 2:
            if not node.table and node.name.lower() == SESSION_WINDOW:
                return _struct()
            if node.table.lower() == SESSION_WINDOW:
                return _bound(node.name, node, unknown)
        return node

    outer = query.copy()
    items = []
    for item in outer.expressions:
        rewritten = item.transform(bounds)
        if rewritten != item and not isinstance(item, exp.Alias):  # Spark's name for it
            if isinstance(item, exp.Column):
                name = item.name
            else:
                name = SESSION_WINDOW if normalized(item) == window else render(item)
            rewritten = exp.alias_(rewritten, name, quoted=True)
        items.append(rewritten)
    outer.set("expressions", items)
    having = outer.args.get("having")
    if having is not None:
        outer.set("having", having.transform(bounds))
    outer.set("where", None)
    outer.set(
        "group",
        exp.Group(
            expressions=[
                *(k.copy() for k in others),
                exp.column(SESSION_START),
                exp.column(SESSION_END),
            ]
        ),
    )
    sessions = exp.to_table(relation)
    sessions.set("alias", exp.TableAlias(this=exp.to_identifier(table.alias_or_name)))
    set_from_table(outer, sessions)
    if unknown or any(is_session_window(n) for n in outer.walk()):
        return None
    return outer


def _bound(field: str, node: exp.Expr, unknown: list[exp.Expr]) -> exp.Expr:
    """The column of a session's ``start`` or ``end`` (any other field goes to ``unknown``)."""
    if field.lower() == "start":
        return exp.column(SESSION_START)
    if field.lower() == "end":
        return exp.column(SESSION_END)
    unknown.append(node)
    return node


def _struct() -> exp.Expr:
    """The ``session_window`` column: ``named_struct('start', …, 'end', …)``."""
    return exp.func(
        "named_struct",
        exp.Literal.string("start"),
        exp.column(SESSION_START),
        exp.Literal.string("end"),
        exp.column(SESSION_END),
    )


def _grouping_sets(group: exp.Group) -> bool:
    return any(group.args.get(k) for k in ("grouping_sets", "cube", "rollup", "totals", "all"))


def _names_output(key: exp.Expr, query: exp.Select) -> bool:
    """Whether ``key`` is a position or a name that may mean an output (which the
    sessionizer, reading the input, cannot compute)."""
    if isinstance(key, exp.Literal):
        return True
    if isinstance(key, exp.Column) and not key.table:
        return any(
            item.alias.lower() == key.name.lower() for item in query.expressions if item.alias
        )
    return False


def _row_wise(node: exp.Expr) -> bool:
    return is_row_wise(node) and not any(is_session_window(n) for n in node.walk())
