"""The one place where errors become kopf's: permanent (do not retry) or temporary.

Domain errors and malformed objects are permanent: retrying will not fix them, the
object's status says why. API-server and network trouble is temporary, retried after a
delay (longer when the server throttles).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import aiohttp
import kopf
from pydantic import ValidationError

from dataflow_operator.api.loading import error_lines
from dataflow_operator.controller.control_client import ControlError
from dataflow_operator.controller.kube import ApiError
from dataflow_operator.core.errors import DomainError

__all__ = ["describe_validation", "kopf_error", "mapped_errors"]

RETRY_DELAY = 5.0
THROTTLED_DELAY = 15.0


def describe_validation(error: ValidationError) -> str:
    """``field.path: reason`` lines of a pydantic error, as ``check`` prints them."""
    return "; ".join(f"{path}: {reason}" for path, reason in error_lines(error))


def kopf_error(error: Exception) -> Exception:
    """The kopf error that tells kopf what to do about ``error``."""
    if isinstance(error, kopf.PermanentError | kopf.TemporaryError):
        return error
    if isinstance(error, DomainError):
        return kopf.PermanentError(f"{error.reason}: {error.message}")
    if isinstance(error, ValidationError):
        return kopf.PermanentError(f"InvalidSpec: {describe_validation(error)}")
    if isinstance(error, ApiError):
        if error.status == 429:
            return kopf.TemporaryError(str(error), delay=THROTTLED_DELAY)
        if error.status in (400, 403, 422):
            return kopf.PermanentError(str(error))
        return kopf.TemporaryError(str(error), delay=RETRY_DELAY)
    if isinstance(error, ControlError | aiohttp.ClientError | TimeoutError):
        return kopf.TemporaryError(str(error), delay=RETRY_DELAY)
    return error


@contextmanager
def mapped_errors() -> Iterator[None]:
    """Re-raise anything from the body as the kopf error :func:`kopf_error` chooses."""
    try:
        yield
    except Exception as error:
        mapped = kopf_error(error)
        if mapped is error:
            raise
        raise mapped from error
