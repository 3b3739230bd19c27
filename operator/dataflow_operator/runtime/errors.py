"""What failed in Spark, read from its error conditions, for status and the command line.

Spark hands a failure to the driver as a chain of errors, outermost first: a failed
stream (``STREAM_FAILED``) caused by a Python worker's error (``PYTHON_EXCEPTION``), a
data source's (``PYTHON_DATA_SOURCE_ERROR``), a cast (``CAST_INVALID_INPUT``)… Each link
that is a Spark error has a condition, a SQLSTATE and message parameters; PySpark
converts each link, and the chain is read through them (:func:`spark_chain`), not
from the message text.

An exception raised in Python code that Spark runs (a worker's reader or processor,
the driver's ``foreachBatch``) crosses the JVM only as its traceback text, in a message
parameter or the link's message. Its last line, ``module.Type: message``, names the
exception (:class:`PythonRaise`); the type is resolved to its class, so that a data
error is told by ``issubclass``, not by its name.
"""

from __future__ import annotations

import builtins
import logging
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass

from pyspark.errors import PySparkException

from dataflow_operator.core.changelog import RESERVED_PREFIX
from dataflow_operator.core.errors import DomainError

__all__ = [
    "DATA_ERRORS",
    "PythonRaise",
    "is_data_error",
    "one_line",
    "quiet_repeated_error_logs",
    "spark_chain",
    "without_reserved_suggestions",
]

DATA_ERRORS: tuple[type[BaseException], ...] = (
    DomainError,
    ValueError,
    KeyError,
    TypeError,
    FileNotFoundError,
    PermissionError,
)
"""Python errors that come from the data or the query: retrying gives them again."""

DATA_SQL_STATES = ("22", "42")
"""SQLSTATE classes of Spark errors that come from the data (22) or the query (42)."""

MAX_LENGTH = 400
_TRACEBACK = "Traceback (most recent call last):"
_TRACEBACK_PARAMETERS = ("traceback", "msg")


@dataclass(frozen=True)
class PythonRaise:
    """An exception raised in Python code that Spark ran, as its traceback names it."""

    type_name: str
    message: str

    @classmethod
    def from_traceback(cls, text: str) -> PythonRaise | None:
        """The exception of the last traceback in ``text``: its unindented last line.

        A traceback is its header, indented frames, then ``module.Type: message``;
        a parameter may hold only its tail, so the header is not required.
        """
        start = text.rfind(_TRACEBACK)
        tail = text[start + len(_TRACEBACK) :] if start >= 0 else text
        for line in tail.splitlines():
            if not line.strip() or line[0].isspace():
                continue
            name, colon, message = line.partition(":")
            if colon and name.replace(".", "").replace("_", "").isalnum():
                return cls(name.strip(), message.strip())
        return None

    def resolve(self) -> type[BaseException] | None:
        """The exception's class, when its module is loaded here (or it is built in)."""
        module, _, name = self.type_name.rpartition(".")
        found = getattr(sys.modules.get(module) if module else builtins, name, None)
        return found if isinstance(found, type) and issubclass(found, BaseException) else None

    def is_data_error(self) -> bool:
        """True when the raised class is one of :data:`DATA_ERRORS`."""
        raised = self.resolve()
        return raised is not None and issubclass(raised, DATA_ERRORS)

    def line(self) -> str:
        """``Type: message``, as the traceback ends."""
        return f"{self.type_name}: {self.message}" if self.message else self.type_name


def spark_chain(error: BaseException) -> Iterator[PySparkException]:
    """``error`` and the Spark errors that caused it, outermost first.

    PySpark keeps each converted JVM cause on the error it converted; it has no public
    accessor in PySpark 4, so the attribute is read here and nowhere else (the tests
    read real failures through it).
    """
    link: object = error
    while isinstance(link, PySparkException):
        yield link
        link = getattr(link, "_cause", None)


def _python_raise(chain: list[PySparkException]) -> PythonRaise | None:
    """The innermost Python exception named in the chain's parameters or messages."""
    for link in reversed(chain):
        parameters = link.getMessageParameters() or {}
        texts = [parameters.get(key, "") for key in _TRACEBACK_PARAMETERS]
        if link.getCondition() is None:  # not a Spark error: its message is the text
            texts.append(str(link))
        for text in texts:
            found = PythonRaise.from_traceback(text)
            if found is not None:
                return found
    return None


def _condition(chain: list[PySparkException]) -> PySparkException | None:
    """The innermost link that is a Spark error with a condition."""
    return next((link for link in reversed(chain) if link.getCondition()), None)


QUERY_CONTEXT_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")
"""PySpark's loggers that print a failed query's error as a JSON line on stderr when the
error is raised, before the caller has handled it."""

PY4J_CALLBACK_LOGGERS = ("py4j.clientserver", "py4j.java_gateway")
"""py4j's loggers that print the whole traceback of an exception raised in Python code the
JVM called back (a query's ``foreachBatch``) before handing it to the JVM, which fails the
query with it."""


class _QuietForRelayedDataErrors(logging.Filter):
    """Drops py4j's report of a callback that failed on a data error Spark relayed to it
    (a bad value a worker read while the sink collected the batch): the query fails with
    that error, and the command reports it as its one line. An exception the callback
    raised itself (a bug in the sink) is still reported, traceback and all."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not (isinstance(error, PySparkException) and is_data_error(error))


_RELAYED_DATA_ERRORS = _QuietForRelayedDataErrors()


def quiet_repeated_error_logs() -> None:
    """Silence the logs that print a data error before its caller has handled it
    (:data:`QUERY_CONTEXT_LOGGERS`, and py4j's copy of a relayed one:
    :data:`PY4J_CALLBACK_LOGGERS`): a command reports each failure as its one line
    (:func:`one_line`), so those copies would only repeat it, unreadably. Idempotent."""
    for name in QUERY_CONTEXT_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)
    for name in PY4J_CALLBACK_LOGGERS:
        logging.getLogger(name).addFilter(_RELAYED_DATA_ERRORS)  # added once however often


_SUGGESTIONS = re.compile(
    r"(?P<lead> ?)Did you mean one of the following\? \[(?P<names>[^\]]*)\]\.?"
)


def without_reserved_suggestions(text: str) -> str:
    """Spark's "Did you mean" list without the runtime's own columns (``__time``,
    ``__diff``…), which a query cannot mean; without the sentence when none is left."""

    def kept(match: re.Match[str]) -> str:
        names = [name.strip() for name in match["names"].split(",") if name.strip()]
        mine = [
            n for n in names if f"`{RESERVED_PREFIX}" not in n and not n.startswith(RESERVED_PREFIX)
        ]
        if not mine:
            return ""
        return f"{match['lead']}Did you mean one of the following? [{', '.join(mine)}]."

    return _SUGGESTIONS.sub(kept, text)


_PY4J_PREAMBLE = re.compile(r"\A\s*An error occurred while calling \S+\.\s*\n\s*:?\s*")
"""What py4j puts before a Java exception it did not convert: the call's handle (``o84.load``),
which says nothing to a user; the exception's own line follows it."""


def _without_py4j_preamble(text: str) -> str:
    """``text`` from the Java exception on, when it is a raw py4j error's."""
    return _PY4J_PREAMBLE.sub("", text, count=1)


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def one_line(error: BaseException) -> str:
    """The gist of ``error`` on one line, with its cause.

    In order: a domain error's message; the message of a data error raised in Python
    code Spark ran (``BadValue: …`` without its type); another raised exception, after
    the innermost Spark condition; the innermost condition and its message's first line;
    the error's own first line.
    """
    if isinstance(error, DomainError):
        return error.message[:MAX_LENGTH]
    chain = list(spark_chain(error))
    raised = _python_raise(chain)
    spark_error = _condition(chain)
    condition = spark_error.getCondition() if spark_error else None
    if raised is not None and raised.is_data_error():
        return raised.message[:MAX_LENGTH]
    if raised is not None:
        cause = raised.line()
    elif spark_error is not None:
        cause = _first_line(spark_error.getMessage()).removeprefix(f"[{condition}]").strip()
        cause = without_reserved_suggestions(cause)
    else:
        cause = _first_line(_without_py4j_preamble(str(error))) or type(error).__name__
    return (f"{condition}: {cause}" if condition else cause)[:MAX_LENGTH]


def is_data_error(error: BaseException) -> bool:
    """True when ``error`` comes from the data or the query (retrying gives it again).

    A Python data error (:data:`DATA_ERRORS`) raised here or in code Spark ran, or a
    Spark error of a data or query SQLSTATE class (:data:`DATA_SQL_STATES`).
    """
    if isinstance(error, DATA_ERRORS):
        return True
    chain = list(spark_chain(error))
    raised = _python_raise(chain)
    if raised is not None:
        return raised.is_data_error()
    spark_error = _condition(chain)
    state = spark_error.getSqlState() if spark_error else None
    return state is not None and state.startswith(DATA_SQL_STATES)
