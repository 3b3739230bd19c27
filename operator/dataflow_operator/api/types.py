"""Field types shared by the models: durations, timestamps, timelines, quantities.

Each is an ``Annotated`` type: it parses what users write, serializes back to the
canonical form, and carries the JSON schema that the CRD generator turns into a
structural OpenAPI schema.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, PlainSerializer, WithJsonSchema
from pydantic_core import PydanticCustomError

from dataflow_operator.core.changelog import reserved_column_problem
from dataflow_operator.core.ddl import parse_schema
from dataflow_operator.core.durations import Duration, parse_duration
from dataflow_operator.core.errors import DomainError
from dataflow_operator.core.time import Timestamp, format_timestamp, parse_timestamp
from dataflow_operator.core.timelines import Timeline, TimelineKind, validate_timeline_name

__all__ = [
    "DurationField",
    "QuantityField",
    "SparkSchemaField",
    "TimelineField",
    "TimestampField",
]


def _duration(value: Any) -> Duration:
    if isinstance(value, Duration):
        return value
    if not isinstance(value, str | int) or isinstance(value, bool):
        raise PydanticCustomError(
            "duration",
            "expected a duration such as '21d' or '1h30m', got {value}",
            {"value": repr(value)},
        )
    try:
        return parse_duration(value)
    except DomainError as error:
        raise PydanticCustomError("duration", "{reason}", {"reason": error.message}) from None


DurationField = Annotated[
    Duration,
    BeforeValidator(_duration),
    PlainSerializer(str, return_type=str),
    WithJsonSchema({"x-kubernetes-int-or-string": True}),
]
"""A duration: ``21d1h``, ``30 days``, ``500ms``, ``P21DT1H`` or ``0``."""


def _timestamp(value: Any) -> Timestamp:
    if isinstance(value, bool):
        raise PydanticCustomError(
            "timestamp", "expected a timestamp, got {value}", {"value": value}
        )
    if isinstance(value, int):
        if value < 0:
            raise PydanticCustomError("timestamp", "timestamp must not be before the epoch", {})
        return value
    if not isinstance(value, str):
        # YAML turns an unquoted RFC 3339 time into a datetime.
        isoformat = getattr(value, "isoformat", None)
        if isoformat is None:
            raise PydanticCustomError(
                "timestamp", "expected an RFC 3339 timestamp, got {value}", {"value": repr(value)}
            )
        value = isoformat()
    try:
        return parse_timestamp(value)
    except ValueError as error:
        raise PydanticCustomError("timestamp", "{reason}", {"reason": str(error)}) from None


TimestampField = Annotated[
    Timestamp,
    BeforeValidator(_timestamp),
    PlainSerializer(format_timestamp, return_type=str),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]
"""A point in time: RFC 3339 (``2026-01-01T00:00:00Z``) or epoch milliseconds."""


def _timeline(value: Any) -> Timeline:
    if isinstance(value, Timeline):
        return value
    if value == TimelineKind.EPOCH_MILLISECONDS.value:
        return Timeline.epoch_milliseconds()
    named = [kind.value for kind in TimelineKind if kind is not TimelineKind.EPOCH_MILLISECONDS]
    if isinstance(value, dict) and len(value) == 1:
        ((key, name),) = value.items()
        if key in named and isinstance(name, str):
            try:
                return Timeline(TimelineKind(key), validate_timeline_name(name))
            except DomainError as error:
                raise PydanticCustomError(
                    "timeline", "{reason}", {"reason": error.message}
                ) from None
    raise PydanticCustomError(
        "timeline",
        "expected {choices}, got {value}",
        {
            "choices": "EpochMilliseconds, {user: NAME}, {external: NAME} or {counter: NAME}",
            "value": repr(value),
        },
    )


def _dump_timeline(timeline: Timeline) -> str | dict[str, str]:
    if timeline.name is None:
        return timeline.kind.value
    return {timeline.kind.value: timeline.name}


TimelineField = Annotated[
    Timeline,
    BeforeValidator(_timeline),
    PlainSerializer(_dump_timeline),
    # A string or a one-key object: structural schemas cannot say "string or object", so
    # this one field keeps unknown content and the operator validates it.
    WithJsonSchema({"x-kubernetes-preserve-unknown-fields": True}),
]
"""``EpochMilliseconds`` or ``{user: NAME}`` / ``{external: NAME}`` / ``{counter: NAME}``."""

_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m)?$")


def _quantity(value: Any) -> str:
    text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(text, str) or not _QUANTITY.match(text):
        raise PydanticCustomError(
            "quantity",
            "expected a Kubernetes quantity such as '2Gi' or '512Mi', got {value}",
            {"value": repr(value)},
        )
    return text


QuantityField = Annotated[
    str,
    BeforeValidator(_quantity),
    WithJsonSchema({"x-kubernetes-int-or-string": True}),
]
"""A Kubernetes resource quantity (``2Gi``, ``512Mi``)."""


def _spark_schema(value: str) -> str:
    try:
        columns = parse_schema(value)
    except DomainError as error:
        raise PydanticCustomError("spark_schema", "{reason}", {"reason": error.message}) from None
    for column in columns:
        problem = reserved_column_problem(column.name)
        if problem is not None:
            raise PydanticCustomError("spark_schema", "{reason}", {"reason": problem})
    return value


SparkSchemaField = Annotated[str, AfterValidator(_spark_schema)]
"""A Spark DDL schema (``name TYPE, …``), checked offline by :mod:`dataflow_operator.core.ddl`."""
