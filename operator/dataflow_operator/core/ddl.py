"""Spark DDL schemas (``name TYPE [NOT NULL] [COMMENT '…'], …``), parsed without Spark.

What a source's ``schema`` may say, checked offline (``check``, admission) so that a
typo is an error naming the column and the problem instead of a Spark failure on a
replica. The grammar is Spark's table schema (``colTypeList`` of its SQL grammar, what
``StructType.fromDDL`` reads); types are Spark's: every primitive name and alias, ``DECIMAL(p,s)``,
``CHAR(n)``/``VARCHAR(n)``, ``STRING COLLATE name``, ``TIME(p)``, year-month and day-time
``INTERVAL``s, and nested ``ARRAY<…>``, ``MAP<…,…>``, ``STRUCT<name[:] TYPE, …>``.
Names are identifiers or backquoted (`` `a b` ``, ````` `` ````` for a backquote).
Collation names are Spark's to check at run time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dataflow_operator.core.errors import DomainError

__all__ = ["Column", "DdlError", "parse_schema", "render_schema"]

PLAIN_TYPES = frozenset(
    {
        "BOOLEAN", "TINYINT", "BYTE", "SMALLINT", "SHORT", "INT", "INTEGER", "BIGINT",
        "LONG", "FLOAT", "REAL", "DOUBLE", "DATE", "TIMESTAMP", "TIMESTAMP_NTZ",
        "TIMESTAMP_LTZ", "STRING", "BINARY", "VOID", "VARIANT", "INTERVAL",
    }
)  # fmt: skip
"""Types without parameters (``INTERVAL`` alone is the calendar interval)."""
DECIMAL_TYPES = frozenset({"DECIMAL", "DEC", "NUMERIC"})
LENGTH_TYPES = frozenset({"CHAR", "CHARACTER", "VARCHAR"})
MAX_DECIMAL_PRECISION = 38
_YEAR_MONTH = ("YEAR", "MONTH")
_DAY_TIME = ("DAY", "HOUR", "MINUTE", "SECOND")

_TOKEN = re.compile(
    r"\s*(?:(?P<quoted>`(?:[^`]|``)*`)|(?P<string>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")"
    r"|(?P<word>[A-Za-z0-9_]+)|(?P<punct><>|[<>(),:])|(?P<other>\S))"
)
_NUMBER = re.compile(r"\d+(E\d+)?(L|S|Y|D|F|BD)?", re.IGNORECASE)
"""Words Spark's lexer reads as numeric literals (``1d`` is a double), never names."""


class DdlError(DomainError):
    """A schema that is not valid Spark DDL."""


@dataclass(frozen=True, slots=True)
class Column:
    """One column: its name, its type in canonical DDL, whether it may be null."""

    name: str
    type: str
    nullable: bool = True
    comment: str | None = None


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str
    text: str
    position: int


def _tokens(ddl: str) -> list[_Token]:
    tokens = []
    position = 0
    while position < len(ddl):
        match = _TOKEN.match(ddl, position)
        if match is None:  # only trailing whitespace is left
            break
        kind = match.lastgroup or "other"
        tokens.append(_Token(kind, match.group(kind), match.start(kind)))
        position = match.end()
    return tokens


def quote(name: str) -> str:
    """``name`` backquoted for DDL."""
    return "`" + name.replace("`", "``") + "`"


class _Parser:
    def __init__(self, ddl: str) -> None:
        self.tokens = _tokens(ddl)
        self.index = 0
        self.column: str | None = None

    def fail(self, problem: str) -> DdlError:
        where = f'column "{self.column}": ' if self.column is not None else ""
        return DdlError(where + problem)

    def peek(self, offset: int = 0) -> _Token | None:
        at = self.index + offset
        return self.tokens[at] if at < len(self.tokens) else None

    def next(self, expected: str) -> _Token:
        token = self.peek()
        if token is None:
            raise self.fail(f"expected {expected}, got the end of the schema")
        self.index += 1
        return token

    def at(self, *texts: str) -> bool:
        token = self.peek()
        return (
            token is not None and token.kind in {"word", "punct"} and (token.text.upper() in texts)
        )

    def expect(self, text: str) -> None:
        token = self.next(f'"{text}"')
        if token.text.upper() != text:
            raise self.fail(f'expected "{text}", got "{token.text}"')

    def name(self) -> str:
        token = self.next("a column name")
        if token.kind == "quoted":
            return token.text[1:-1].replace("``", "`")
        if token.kind != "word" or _NUMBER.fullmatch(token.text):
            raise self.fail(f'expected a column name, got "{token.text}"')
        return token.text

    def integer(self) -> int:
        token = self.next("a number")
        if token.kind != "word" or not token.text.isdigit():
            raise self.fail(f'expected a number, got "{token.text}"')
        return int(token.text)

    def parameters(self) -> list[int]:
        if not self.at("("):
            return []
        self.expect("(")
        values = [self.integer()]
        while self.at(","):
            self.expect(",")
            values.append(self.integer())
        self.expect(")")
        return values

    def data_type(self) -> str:
        token = self.next("a type")
        if token.kind != "word":
            raise self.fail(f'expected a type, got "{token.text}"')
        name = token.text.upper()
        if name in {"ARRAY", "MAP", "STRUCT"} and not self.at("<", "<>"):
            raise self.fail(f'type "{token.text}" needs its element types, e.g. {name}<…>')
        if name == "ARRAY":
            self.expect("<")
            element = self.data_type()
            self.expect(">")
            return f"ARRAY<{element}>"
        if name == "MAP":
            self.expect("<")
            key = self.data_type()
            self.expect(",")
            value = self.data_type()
            self.expect(">")
            return f"MAP<{key}, {value}>"
        if name == "STRUCT":
            return self.struct()
        if name == "INTERVAL" and self.at(*_YEAR_MONTH, *_DAY_TIME):
            return self.interval()
        return self.primitive(name, token.text)

    def struct(self) -> str:
        fields = self.struct_fields()
        return f"STRUCT<{', '.join(f'{quote(f.name)}: {_column_rest(f)}' for f in fields)}>"

    def struct_fields(self) -> list[Column]:
        """``<name[:] TYPE …, …>`` or ``<>``, after ``STRUCT``."""
        if self.at("<>"):
            self.index += 1
            return []
        self.expect("<")
        if self.at(">"):
            self.index += 1
            return []
        outer, fields = self.column, []
        while True:
            name = self.name()
            self.column = name if outer is None else f"{outer}.{name}"
            if self.at(":"):
                self.index += 1
            fields.append(self.field(name))
            if not self.at(","):
                break
            self.index += 1
        self.column = outer
        self.expect(">")
        return fields

    def field(self, name: str) -> Column:
        data_type = self.data_type()
        nullable = True
        if self.at("NOT"):
            self.index += 1
            self.expect("NULL")
            nullable = False
        comment = None
        if self.at("COMMENT"):
            self.index += 1
            token = self.next("a quoted comment")
            if token.kind != "string":
                raise self.fail(f'expected a quoted comment, got "{token.text}"')
            comment = token.text
        return Column(name, data_type, nullable, comment)

    def interval(self) -> str:
        start = self.next("an interval unit").text.upper()
        units = _YEAR_MONTH if start in _YEAR_MONTH else _DAY_TIME
        if not self.at("TO"):
            return f"INTERVAL {start}"
        self.index += 1
        end = self.next("an interval unit").text.upper()
        if end not in units or units.index(end) <= units.index(start):
            raise self.fail(f'invalid interval "INTERVAL {start} TO {end}"')
        return f"INTERVAL {start} TO {end}"

    def primitive(self, name: str, written: str) -> str:
        values = self.parameters()
        if name == "STRING" and self.at("COLLATE"):
            self.index += 1
            collation = self.name()
            return f"STRING COLLATE {collation}"
        if name in PLAIN_TYPES and not values:
            return name
        if name in DECIMAL_TYPES and len(values) <= 2:
            precision = values[0] if values else 10
            scale = values[1] if len(values) == 2 else 0
            if precision > MAX_DECIMAL_PRECISION or scale > precision:
                raise self.fail(
                    f"DECIMAL({precision},{scale}): the precision must be at most "
                    f"{MAX_DECIMAL_PRECISION} and the scale at most the precision"
                )
            return f"DECIMAL({precision},{scale})"
        if name in LENGTH_TYPES and len(values) == 1:
            return f"{'VARCHAR' if name == 'VARCHAR' else 'CHAR'}({values[0]})"
        if name == "TIME" and len(values) <= 1:
            return f"TIME({values[0]})" if values else "TIME"
        if name in LENGTH_TYPES:
            raise self.fail(f'type "{written}" needs a length, e.g. {name}(10)')
        if name in PLAIN_TYPES | DECIMAL_TYPES | {"TIME"}:
            raise self.fail(f'type "{written}" takes no parameters {tuple(values)}')
        raise self.fail(f'unknown type "{written}"')


def _column_rest(column: Column) -> str:
    rest = column.type + ("" if column.nullable else " NOT NULL")
    return rest + (f" COMMENT {column.comment}" if column.comment is not None else "")


def parse_schema(ddl: str) -> list[Column]:
    """The columns of a schema; :class:`DdlError` naming the column and the problem."""
    parser = _Parser(ddl)
    if not parser.tokens:
        raise DdlError("the schema is empty")
    columns: list[Column] = []
    while True:
        parser.column = None
        name = parser.name()
        parser.column = name
        twin = next((c.name for c in columns if c.name.lower() == name.lower()), None)
        if twin is not None:
            same = "twice" if twin == name else f'twice (as "{twin}" and "{name}")'
            raise parser.fail(
                f"the column is named {same}; Spark matches names case-insensitively: "
                "rename or remove one"
            )
        columns.append(parser.field(name))
        token = parser.peek()
        if token is None:
            return columns
        if token.text != ",":
            raise parser.fail(f'unexpected "{token.text}"; columns are separated by ","')
        parser.index += 1
        parser.column = None
        if parser.peek() is None:
            raise DdlError("the schema ends with a comma")


def render_schema(columns: list[Column]) -> str:
    """Canonical DDL of ``columns`` (backquoted names, canonical type names)."""
    return ", ".join(f"{quote(c.name)} {_column_rest(c)}" for c in columns)
