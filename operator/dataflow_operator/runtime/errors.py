"""One-line errors from Spark's long exceptions, for status and the command line."""

from __future__ import annotations

import re

__all__ = ["is_data_error", "one_line"]

_PYTHON_ERROR = re.compile(
    r"^\s*(?:[\w.]+\.)?(BadValue|ValueError|FileNotFoundError|KeyError|TypeError|"
    r"DomainError|InvalidSql|InvalidSpec|UnknownSource|OSError|PermissionError)"
    r": (.+)$",
    re.MULTILINE,
)
_ERROR_CLASS = re.compile(r"\[([A-Z_.]+)\]\s*([^\n]*)")
MAX_LENGTH = 400


def one_line(error: BaseException) -> str:
    """The gist of ``error`` on one line: the innermost Python error if there is one."""
    text = str(error)
    found = _PYTHON_ERROR.findall(text)
    if found:
        return str(found[-1][1]).strip()[:MAX_LENGTH]
    classed = _ERROR_CLASS.search(text)
    if classed:
        return f"{classed.group(1)}: {classed.group(2)}".strip()[:MAX_LENGTH]
    first = next((line.strip() for line in text.splitlines() if line.strip()), type(error).__name__)
    return first[:MAX_LENGTH]


def is_data_error(error: BaseException) -> bool:
    """True when ``error`` comes from the data or the query (retrying gives it again)."""
    text = str(error)
    return bool(_PYTHON_ERROR.search(text)) or "AnalysisException" in type(error).__name__
