"""One-line errors from Spark's long exceptions, for status and the command line."""

from __future__ import annotations

import re

from pyspark.errors import PySparkException

from dataflow_operator.core.errors import DomainError

__all__ = ["is_data_error", "one_line"]

_PYTHON_ERROR = re.compile(
    r"^\s*(?:[\w.]+\.)?(BadValue|ValueError|FileNotFoundError|KeyError|TypeError|"
    r"DomainError|InvalidSql|InvalidSpec|UnknownSource|OSError|PermissionError)"
    r": (.+)$",
    re.MULTILINE,
)
_ERROR_CLASS = re.compile(r"\[([A-Z_.]+)\]\s*([^\n]*)")
_TRACEBACK = "Traceback (most recent call last):"
MAX_LENGTH = 400


def _condition(error: BaseException) -> str | None:
    """PySpark's error condition (``PYTHON_DATA_SOURCE_ERROR``…) when it has one."""
    if isinstance(error, PySparkException):
        return error.getCondition() or error.getErrorClass()
    return None


def _traceback_cause(text: str) -> str | None:
    """The exception line of the last Python traceback embedded in ``text``.

    A traceback is its header, indented frames, then the unindented exception line
    (``ModuleNotFoundError: No module named 'x'``): the cause, not the header.
    """
    start = text.rfind(_TRACEBACK)
    if start < 0:
        return None
    for line in text[start + len(_TRACEBACK) :].splitlines():
        if line.strip() and not line[0].isspace():
            return line.strip()
    return None


def one_line(error: BaseException) -> str:
    """The gist of ``error`` on one line, with its cause.

    In order: a domain error's message; the innermost domain-level Python error
    (``BadValue: …``) without its type; the exception line of an embedded Python
    traceback, after the error's condition; the condition and its message's first line.
    """
    if isinstance(error, DomainError):
        return error.message[:MAX_LENGTH]
    text = str(error)
    found = _PYTHON_ERROR.findall(text)
    if found:
        return str(found[-1][1]).strip()[:MAX_LENGTH]
    classed = _ERROR_CLASS.search(text)
    condition = _condition(error) or (classed.group(1) if classed else None)
    cause = _traceback_cause(text)
    if cause is None and classed is not None:
        cause = classed.group(2).strip()
    if cause is None:
        cause = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if condition and not cause.startswith(condition):
        return f"{condition}: {cause}".strip()[:MAX_LENGTH]
    return (cause or type(error).__name__)[:MAX_LENGTH]


def is_data_error(error: BaseException) -> bool:
    """True when ``error`` comes from the data or the query (retrying gives it again)."""
    text = str(error)
    return bool(_PYTHON_ERROR.search(text)) or "AnalysisException" in type(error).__name__
