"""Group keys as plain numbers across a stateful operator's pandas boundary, and back.

``transformWithStateInPandas`` hands its processor pandas frames and takes them back:
Spark converts a TIMESTAMP value, and a STRUCT value field by field, one Python object at
a time there (a ``window(…)`` key, a struct of two timestamps, costs more than the rest of
a windowed aggregate's row). Integers cross as NumPy arrays. So a key column is sent
flattened (:meth:`FlatKeys.encoded`): a TIMESTAMP as its microseconds since the epoch, a
STRUCT as whether it is NULL then its fields, each flattened the same way; any other
type as it is. Two keys are equal exactly when their flattened columns are, so the groups
are the same; :meth:`FlatKeys.decoded` rebuilds the keys from the processor's output.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql import functions as F  # noqa: N812 - Spark's convention
from pyspark.sql import types as T  # noqa: N812 - Spark's convention

__all__ = ["FlatKeys"]

PREFIX = "__k"
"""The flattened columns' names: ``__k0``, ``__k1``, … in order."""


@dataclass(frozen=True)
class FlatKeys:
    """The key columns ``keys`` (name and type) and their flattened columns."""

    keys: tuple[T.StructField, ...]

    @property
    def fields(self) -> list[T.StructField]:
        """The flattened columns' names and types, in order."""
        types = [kind for key in self.keys for kind in _leaf_types(key.dataType)]
        return [T.StructField(f"{PREFIX}{i}", kind) for i, kind in enumerate(types)]

    def encoded(self) -> list[Column]:
        """The flattened columns, computed from the key columns of the frame they select
        from."""
        leaves = [
            leaf for key in self.keys for leaf in _encode(F.col(f"`{key.name}`"), key.dataType)
        ]
        return [leaf.alias(field.name) for leaf, field in zip(leaves, self.fields, strict=True)]

    def decoded(self) -> list[Column]:
        """The key columns, named and typed as they were, rebuilt from the flattened
        columns of the frame they select from."""
        leaves = iter(F.col(field.name) for field in self.fields)
        return [_decode(leaves, key.dataType).alias(key.name) for key in self.keys]


def _leaf_types(data_type: T.DataType) -> list[T.DataType]:
    if isinstance(data_type, T.TimestampType):
        return [T.LongType()]
    if isinstance(data_type, T.StructType):
        return [T.IntegerType()] + [
            kind for field in data_type.fields for kind in _leaf_types(field.dataType)
        ]
    return [data_type]


def _encode(value: Column, data_type: T.DataType) -> list[Column]:
    if isinstance(data_type, T.TimestampType):
        return [F.unix_micros(value)]
    if isinstance(data_type, T.StructType):
        fields = [
            leaf
            for field in data_type.fields
            for leaf in _encode(value.getField(field.name), field.dataType)
        ]
        return [value.isNull().cast(T.IntegerType()), *fields]
    return [value]


def _decode(leaves: Iterator[Column], data_type: T.DataType) -> Column:
    if isinstance(data_type, T.TimestampType):
        return F.timestamp_micros(next(leaves))
    if isinstance(data_type, T.StructType):
        null = next(leaves)
        fields = [_decode(leaves, field.dataType).alias(field.name) for field in data_type.fields]
        return F.when(null == 1, F.lit(None).cast(data_type)).otherwise(F.struct(*fields))
    return next(leaves)
