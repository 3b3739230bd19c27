"""Equi-joins maintained in Spark state (``transformWithStateInPandas``): the running half.

The core plans the join (:class:`dataflow_operator.core.join.JoinPlan`): a chain of
two-input joins, one per input after the first. Here :func:`joined_changelog` runs one
of them (:class:`~dataflow_operator.core.join.JoinStep`), turning the changelogs of the
inputs joined so far and of the next input into the changelog of their joined rows (the
last step's is the relation :data:`~dataflow_operator.core.join.JOINED`):

- both sides' updates become one stream: the side (0 left, 1 right), the join key as
  JSON (NULL when a key component is NULL: such rows match nothing), the row as JSON,
  ``__time``, ``__diff``, grouped into
  state keys by the key's hash (:mod:`.buckets`), so that work is partitioned by key;
- :class:`~dataflow_operator.runtime.strategies.arrangement.ArrangedJoin` (a module of
  its own, light to import) keeps, per join key, each side's rows with their
  multiplicities (the *arrangement*, in a ``MapState`` laid out as :mod:`.join_rows`
  says) and joins each update with the other side's rows (``ΔL ⋈ R_old + L_new ⋈ ΔR``:
  the same batch's changes of both sides join once), at the later of the two times, and
  for an outer join emits the null-extended rows of a side when the other side's total
  multiplicity for the key goes from or to zero;
- the joined rows are parsed back into typed columns, left then right.

Rows travel as JSON (with microsecond timestamps) so that equal rows are equal strings
in Python whatever pandas makes of their types (an integer column with a NULL becomes
floats there). Keys are compared after Spark widens the two sides' key types to one
(a union does that); keys of different kinds (a number and a string) are not joined
here: :func:`joined_changelog` returns ``None`` and the engine recomputes.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F  # noqa: N812 - Spark's convention
from pyspark.sql import types as T  # noqa: N812 - Spark's convention

from dataflow_operator.core.join import JoinStep
from dataflow_operator.runtime.changelog_store import DIFF, TIME
from dataflow_operator.runtime.strategies.arrangement import (
    LEFT_ROW,
    RIGHT_ROW,
    ArrangedJoin,
)
from dataflow_operator.runtime.strategies.buckets import bucket_of
from dataflow_operator.runtime.strategies.columns import BUCKET, KEY, ROW, SIDE
from dataflow_operator.runtime.strategies.packed_rows import PACKED_SCHEMA, pack
from dataflow_operator.runtime.strategies.pair_filter import PairFilter

__all__ = ["joined_changelog"]

JSON_OPTIONS = {
    "timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX",
    "timestampNTZFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSS",
}
"""Rows as JSON keep every microsecond of their timestamps (Spark's default drops them)."""


def _data_columns(frame: DataFrame) -> list[str]:
    return [c for c in frame.columns if c not in (TIME, DIFF)]


def _quoted(name: str) -> Column:
    return F.col(f"`{name.replace('`', '``')}`")


def _tagged(side: int, frame: DataFrame, keys: tuple[str, ...]) -> DataFrame:
    """A side's updates as (side, keys…, row JSON, time, diff)."""
    row = F.to_json(F.struct(*[_quoted(c) for c in _data_columns(frame)]), JSON_OPTIONS)
    return frame.select(
        F.lit(side).alias(SIDE),
        *[F.expr(key).alias(f"__k{i}") for i, key in enumerate(keys)],
        row.alias(ROW),
        F.col(TIME),
        F.col(DIFF),
    )


def _comparable(left: T.DataType, right: T.DataType) -> bool:
    """Whether keys of these types can be matched after Spark widens them to one."""
    if left == right:
        return True
    return isinstance(left, T.NumericType) and isinstance(right, T.NumericType)


def _normalized(column: Column, data_type: T.DataType) -> Column:
    """``column`` with -0.0 as 0.0 (equal in SQL, different in JSON)."""
    if isinstance(data_type, T.FloatType | T.DoubleType):
        return F.when(column == 0, F.lit(0).cast(data_type)).otherwise(column)
    return column


def joined_changelog(
    step: JoinStep,
    left: DataFrame,
    right: DataFrame,
    *,
    names: tuple[Sequence[str], Sequence[str]],
    until: int | None,
    in_time_order: bool = False,
    pairs: PairFilter | None = None,
) -> DataFrame | None:
    """The changelog of joined rows, or ``None`` if the keys' types cannot be matched.

    ``left`` and ``right`` are the sides' changelogs (data columns, ``__time``,
    ``__diff``). Updates at or past ``until`` never enter the join's state. The result
    has the left side's columns named ``names[0]``, the right side's ``names[1]`` (in a
    chain, :func:`~dataflow_operator.core.join.joined_column`'s), then ``__time`` and
    ``__diff``.

    With ``in_time_order`` each joined update is held until the watermark (the inputs'
    frontier) reaches its time, so that no batch carries an update at a time before one
    already emitted: what a downstream operator that applies updates in time order
    (the aggregate's totals) needs. Without it updates come as soon as they are known.

    ``pairs``: the matched pairs to emit (:mod:`.pair_filter`, over the rows as JSON
    named as ``left`` and ``right`` name their columns); by default every one.
    """
    tagged = [_tagged(0, left, step.keys[0]), _tagged(1, right, step.keys[1])]
    count = len(step.keys[0])
    key_names = [f"__k{i}" for i in range(count)]
    for name in key_names:
        if not _comparable(tagged[0].schema[name].dataType, tagged[1].schema[name].dataType):
            return None
    if until is not None:
        tagged = [frame.filter(F.col(TIME) < F.lit(until)) for frame in tagged]
    union = tagged[0].unionByName(tagged[1])
    keys = [_normalized(F.col(n), union.schema[n].dataType) for n in key_names]
    any_null = F.lit(False)
    for name in key_names:
        any_null = any_null | F.col(name).isNull()
    arranged = union.select(
        F.col(SIDE),
        F.when(any_null, F.lit(None).cast("string"))
        .otherwise(F.to_json(F.struct(*keys), JSON_OPTIONS))
        .alias(KEY),
        F.col(ROW),
        F.col(TIME),
        F.col(DIFF),
        bucket_of([F.col(n) for n in key_names]).alias(BUCKET),
    )
    output = T.StructType(
        [
            T.StructField(LEFT_ROW, T.StringType()),
            T.StructField(RIGHT_ROW, T.StringType()),
            T.StructField(TIME, T.LongType()),
            T.StructField(DIFF, T.LongType()),
        ]
    )
    packed = arranged.mapInArrow(pack, PACKED_SCHEMA)
    joined = packed.groupBy(BUCKET).transformWithStateInPandas(
        statefulProcessor=ArrangedJoin(step.preserves, in_time_order=in_time_order, pairs=pairs),
        outputStructType=output,
        outputMode="Append",
        timeMode="EventTime",
    )
    schemas = [
        T.StructType([f for f in side.schema.fields if f.name not in (TIME, DIFF)])
        for side in (left, right)
    ]
    parsed = joined.select(
        F.from_json(F.col(LEFT_ROW), schemas[0], JSON_OPTIONS).alias(LEFT_ROW),
        F.from_json(F.col(RIGHT_ROW), schemas[1], JSON_OPTIONS).alias(RIGHT_ROW),
        F.col(TIME),
        F.col(DIFF),
    )
    return parsed.select(
        *[
            F.col(LEFT_ROW).getField(f.name).alias(name)
            for f, name in zip(schemas[0].fields, names[0], strict=True)
        ],
        *[
            F.col(RIGHT_ROW).getField(f.name).alias(name)
            for f, name in zip(schemas[1].fields, names[1], strict=True)
        ],
        F.col(TIME),
        F.col(DIFF),
    )
