"""Equi-joins maintained in Spark state, checked differentially against Spark itself.

Random inserts and deletes go through ``changelog`` sources over several batches; after
every batch, at every time it changed, each join dataflow's consolidated output must
equal Spark's own batch query over the consolidated inputs at that time (the oracle).
"""

from __future__ import annotations

import functools
import json
import random
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from tests.runtime.local_rows import local_frame, schema_columns
from tests.runtime.runs import T
from tests.wide import examples, seeds

from dataflow_operator.api.dataflow import DataflowSpec
from dataflow_operator.cli import main
from dataflow_operator.core.incremental import Strategy, plan_query
from dataflow_operator.runtime.engine.config import EngineConfig
from dataflow_operator.runtime.engine.engine import Engine, dataflows_from
from dataflow_operator.runtime.engine.running import BatchOutput
from dataflow_operator.runtime.strategies import join as join_module

pytestmark = pytest.mark.spark

SCHEMAS = {
    "l": "k INT, s STRING, v BIGINT",
    "r": "k BIGINT, s STRING, w STRING",
}
KEYS = [None, 0, 1, 2]
TAGS = [None, "x", "y"]

JOINS = {
    "inner": "SELECT l.v, r.w, l.k FROM l JOIN r ON l.k = r.k",
    "left": "SELECT l.v, r.w FROM l LEFT JOIN r ON l.k = r.k",
    "right": "SELECT v, w, r.k FROM l RIGHT OUTER JOIN r ON r.k = l.k",
    "full": "SELECT l.*, r.w FROM l FULL JOIN r ON l.k = r.k WHERE v IS NULL OR v < 7",
    "two_keys": (
        "SELECT l.v + 1 AS next, r.w, r.s FROM l FULL OUTER JOIN "
        "(SELECT k, s, upper(w) AS w FROM r WHERE w <> 'c') AS r ON l.k = r.k AND l.s = r.s"
    ),
    # GROUP BY over the joined rows: the aggregate's totals in state after the join's.
    "grouped": "SELECT r.w, count(*) AS n, sum(l.v) AS total FROM l JOIN r ON l.k = r.k GROUP BY r.w",
    "grouped_min": (
        "SELECT r.w, min(l.v) AS low, max(l.s) AS high FROM l JOIN r ON l.k = r.k GROUP BY r.w"
    ),
    "grouped_outer": (
        "SELECT l.k, count(r.w) AS matched, count(*) AS n, avg(v) AS mean FROM l "
        "LEFT JOIN r ON l.k = r.k AND l.s = r.s GROUP BY l.k HAVING count(*) > 1"
    ),
    # A comma join whose equalities are in WHERE, and FILTER on its aggregates: the same
    # join and aggregate, rewritten (core.sql_rewrites).
    "comma": "SELECT l.v, r.w, l.k FROM l, r WHERE l.k = r.k AND l.s = r.s AND v > 1",
    # an inner join's residual condition: a filter of the matched pairs
    "residual": "SELECT l.v, r.w, l.s FROM l JOIN r ON l.k = r.k AND (l.s IS NULL OR l.s <> r.s)",
    # comparisons the join tests its matched pairs with before emitting them
    # (runtime.strategies.pair_filter): numbers, strings, a range, a literal
    "range": (
        "SELECT l.v, r.w, r.k FROM l JOIN r ON l.k = r.k AND l.v >= r.k "
        "WHERE r.s <= l.s AND l.v BETWEEN 1 AND 8 AND r.w <> 'c'"
    ),
    "comma_filtered": (
        "SELECT r.w, count(*) FILTER (WHERE l.v > 2) AS big, sum(l.v) AS total, "
        "max(l.v) FILTER (WHERE l.s = 'x') AS top_x FROM l, r WHERE r.k = l.k GROUP BY r.w"
    ),
}

CHAINS = {
    # the last join tests its pairs with comparisons across all three inputs
    "chain_range": (
        "SELECT l.v, r.w, l2.v AS v2 FROM l JOIN r ON l.k = r.k "
        "JOIN l AS l2 ON l2.k = r.k WHERE l2.v >= l.v AND r.s <= l2.s"
    ),
    # Three inputs (a source read twice): a chain of two-input joins, each later ON
    # comparing the inputs joined so far with the next one.
    "chain": (
        "SELECT l.v, r.w, l2.v AS v2 FROM l JOIN r ON l.k = r.k "
        "LEFT JOIN l AS l2 ON l2.s = r.s AND l2.k = l.k"
    ),
    "chain_grouped": (
        "SELECT r.w, count(*) AS n, sum(l2.v) AS total FROM l FULL JOIN r ON l.k = r.k "
        "JOIN (SELECT k, s, v FROM l WHERE v > 2) AS l2 ON l2.s = r.s GROUP BY r.w"
    ),
}

Update = dict[str, Any]
Rows = Counter[tuple[Any, ...]]


def _source(name: str, path: Path) -> dict[str, Any]:
    return {
        "name": name,
        "changelog": {"path": str(path), "format": "json", "schema": SCHEMAS[name]},
        "timeline": {"external": "erp"},
    }


def _spec(sql: str, sources: list[dict[str, Any]]) -> DataflowSpec:
    return DataflowSpec.model_validate(
        {"cluster": "c", "kind": "Subscribe", "sources": sources, "sql": sql}
    )


def _random_batches(
    seed: int, batches: int, changing: list[str] | None = None
) -> list[dict[str, list[Update]]]:
    """Per batch and source, inserts and deletes of rows present (never negative counts).

    ``changing``: per batch, the sources that change in it (``"lr"``: both; default)."""
    rng = random.Random(seed)
    present: dict[str, list[dict[str, Any]]] = {"l": [], "r": []}
    result = []
    for batch in range(batches):
        updates: dict[str, list[Update]] = {"l": [], "r": []}
        for _ in range(rng.randint(3, 12)):
            name = rng.choice(changing[batch] if changing else "lr")
            time = 10 * (batch + 1) + rng.randint(0, 3)
            rows = present[name]
            if rows and rng.random() < 0.35:
                row = rows.pop(rng.randrange(len(rows)))
                updates[name].append({**row, "time": time, "diff": -1})
                continue
            row = {"k": rng.choice(KEYS), "s": rng.choice(TAGS)}
            row["v" if name == "l" else "w"] = (
                rng.randint(0, 9) if name == "l" else rng.choice("abc")
            )
            rows.append(row)
            updates[name].append({**row, "time": time, "diff": 1})
        for changes in updates.values():  # a delete never precedes its insert in time
            changes.sort(key=lambda u: (u["time"], -u["diff"]))
            seen: dict[str, int] = {}
            for update in changes:
                data = json.dumps({c: update[c] for c in update if c not in ("time", "diff")})
                if update["diff"] < 0 and seen.get(data, 0) <= 0:
                    update["time"] = 10 * (batch + 1) + 3
                seen[data] = seen.get(data, 0) + update["diff"]
        result.append(updates)
    return result


def _write(directory: Path, name: str, updates: list[Update]) -> None:
    if updates:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / name).write_text("".join(json.dumps(u) + "\n" for u in updates))


def comparable(value: Any) -> Any:
    """``value`` as the oracle and the engine's output can both be compared: a timestamp
    as a naive UTC datetime (Spark's ``collect`` gives local naive ones, the engine aware
    ones), a struct (the engine's dict, Spark's ``Row``) as the tuple of its values."""
    if isinstance(value, datetime):
        return value.astimezone(UTC).replace(tzinfo=None)
    if isinstance(value, dict):
        return tuple(comparable(v) for v in value.values())
    if isinstance(value, tuple):
        return tuple(comparable(v) for v in value)
    return value


def _consolidated(updates: list[tuple[int, int, tuple[Any, ...]]], time: int) -> Rows:
    counts: Rows = Counter()
    for at, diff, row in updates:
        if at <= time:
            counts[comparable(row)] += diff
    return Counter({row: n for row, n in counts.items() if n})  # negative counts kept


ORACLE_THREADS = 4
"""Oracle queries at a time (threads of the test's one Spark session)."""


def _collect(spark: SparkSession, sql: str) -> Rows:
    return Counter(comparable(tuple(row)) for row in spark.sql(sql).collect())


def oracle(
    spark: SparkSession, queries: dict[str, str], inputs: dict[str, list[Update]], time: int
) -> dict[str, Rows]:
    """Spark's batch queries over the inputs consolidated at ``time``, by name."""
    for name, updates in inputs.items():
        counts: Counter[str] = Counter()
        for update in updates:
            if update["time"] <= time:
                data = {c: v for c, v in update.items() if c not in ("time", "diff")}
                counts[json.dumps(data, sort_keys=True)] += update["diff"]
        columns = [column for column, _ in schema_columns(SCHEMAS[name])]
        rows = [
            tuple(json.loads(r)[c] for c in columns) for r, n in counts.items() for _ in range(n)
        ]
        local_frame(spark, SCHEMAS[name], rows).createOrReplaceTempView(name)
    try:
        # Spark runs the queries' jobs side by side: each is mostly the driver's planning.
        with ThreadPoolExecutor(ORACLE_THREADS) as pool:
            answers = {name: pool.submit(_collect, spark, sql) for name, sql in queries.items()}
            return {name: answer.result() for name, answer in answers.items()}
    finally:
        for name in inputs:
            spark.catalog.dropTempView(name)


def seeded_half(queries: dict[str, str], seed: int) -> dict[str, str]:
    """Half of ``queries``, chosen by ``seed``: each random run checks a different half."""
    names = random.Random(seed).sample(sorted(queries), (len(queries) + 1) // 2)
    return {name: queries[name] for name in sorted(names)}


def _dataflow(query: str) -> str:
    """The dataflow that maintains ``query`` (a DNS-1123 name: no underscores)."""
    return query.replace("_", "-")


def check_joins(
    spark: SparkSession,
    directory: Path,
    seed: int,
    batches: int = 4,
    restart_before: int | None = None,
    queries: dict[str, str] = JOINS,
    strategy: Strategy | None = Strategy.JOIN,
    changing: list[str] | None = None,
) -> None:
    """Run every query (default: :data:`JOINS`) over random batches; compare with the
    oracle. Each must be planned with ``strategy`` (``None``: with any incremental one).

    With ``restart_before``, the engine is closed before that batch and a new one resumes
    from the checkpoint. ``changing``: per batch, the sources that change in it.
    """
    sources = [_source(name, directory / name) for name in SCHEMAS]
    for name in SCHEMAS:
        (directory / name).mkdir(parents=True, exist_ok=True)
    for sql in queries.values():
        planned = plan_query(sql, list(SCHEMAS)).maintenance.strategy
        assert planned is strategy if strategy else planned is not Strategy.GENERAL, sql
    specs = [(_dataflow(name), _spec(sql, sources)) for name, sql in queries.items()]
    outputs: list[BatchOutput] = []
    inputs: dict[str, list[Update]] = {name: [] for name in SCHEMAS}
    checked: dict[str, int] = {}
    engine = Engine(spark, EngineConfig(directory / "state", T), on_output=outputs.append)
    try:
        result = engine.apply(dataflows_from(specs))
        assert not result.failed, result.failed
        for number, batch in enumerate(_random_batches(seed, batches, changing)):
            if number == restart_before:
                engine.close()
                engine = Engine(
                    spark, EngineConfig(directory / "state", T), on_output=outputs.append
                )
                assert not engine.apply(dataflows_from(specs)).failed
            for name, updates in batch.items():
                _write(directory / name, f"{number:04d}.json", updates)
                inputs[name] += updates
            # One batch a step, as a replica's wall clock runs them (each stateful
            # frontier trails by a step); the last step completes the output.
            engine.step(T + number, complete=number == batches - 1)
            # Every time of the input so far that each dataflow's frontier has passed.
            times = sorted({u["time"] for updates in inputs.values() for u in updates})
            report = {d.name: d for d in engine.report().dataflows}
            due: dict[int, dict[str, str]] = {}  # time → the queries to check at it
            for name, sql in queries.items():
                flow = report[_dataflow(name)]
                frontier = flow.frontier[0] if flow.frontier else 0
                for time in [t for t in times if checked.get(name, -1) < t < frontier]:
                    due.setdefault(time, {})[name] = sql
                checked[name] = max([checked.get(name, -1), *(t for t in times if t < frontier)])
            for time, checking in sorted(due.items()):
                for name, expected in oracle(spark, checking, inputs, time).items():
                    emitted = [
                        u for o in outputs if o.dataflow == _dataflow(name) for u in o.updates
                    ]
                    got = _consolidated(emitted, time)
                    assert got == expected, (name, seed, number, time, got, expected)
        keyed = {"keyed": "SELECT * FROM l WHERE k IS NOT NULL"}
        if any(oracle(spark, keyed, inputs, 10**9)["keyed"]):
            # Maintained in Spark state (the arrangements), not recomputed in the driver.
            report = {d.name: d for d in engine.report().dataflows}
            assert all(report[_dataflow(name)].state_rows > 0 for name in queries), report
            assert all(report[_dataflow(n)].strategy_reason is None for n in queries), report
    finally:
        engine.close()


@pytest.mark.slow
@pytest.mark.parametrize("seed", seeds([1234], wider=[7, 42]))
def test_joins_match_spark_on_fixed_seeds(spark: SparkSession, tmp_path: Path, seed: int) -> None:
    check_joins(spark, tmp_path, seed)


@settings(max_examples=examples(), deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(min_value=0, max_value=2**32 - 1))
@pytest.mark.slow
def test_joins_match_spark_on_random_changes(spark: SparkSession, seed: int) -> None:
    with tempfile.TemporaryDirectory(prefix="joins-") as directory:
        queries = seeded_half(JOINS, seed)  # the fixed seed above runs them all
        check_joins(spark, Path(directory), seed, batches=3, queries=queries)


@pytest.mark.slow
def test_joins_of_three_inputs_match_spark(spark: SparkSession, tmp_path: Path) -> None:
    check_joins(spark, tmp_path, seed=31, batches=4, restart_before=2, queries=CHAINS)


@pytest.mark.local_cluster
@pytest.mark.slow
def test_a_restart_from_the_checkpoint_in_the_middle(spark: SparkSession, tmp_path: Path) -> None:
    # Each kind of state a join keeps: both sides' arrangements, the outer sides'
    # unmatched counts, and an aggregate's totals over the joined rows.
    queries = {name: JOINS[name] for name in ("inner", "full", "grouped_outer")}
    check_joins(spark, tmp_path, seed=99, batches=4, restart_before=2, queries=queries)


@pytest.mark.slow
def test_rows_held_in_fragments_match_spark_across_a_restart(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # These batches put a few rows on each key. With sides of more than one row kept in
    # fragments (a tail of one row) and read whole at their third, and batches in which
    # one side changes alone (its rows appended unread), each way a key's rows are stored
    # and read back goes through Spark's state store, its checkpoint included.
    layout = functools.partial(join_module.ArrangedJoin, inline_rows=1, fragment_limit=3)
    monkeypatch.setattr(join_module, "ArrangedJoin", layout)
    queries = {name: JOINS[name] for name in ("inner", "full", "grouped")}
    changing = ["lr", "l", "l", "r", "l", "lr"]
    check_joins(
        spark, tmp_path, seed=5, batches=6, restart_before=3, queries=queries, changing=changing
    )


@pytest.mark.slow
def test_a_join_of_a_dataflow_across_its_temporal_filter_retraction(
    spark: SparkSession, tmp_path: Path
) -> None:
    events, right = tmp_path / "events", tmp_path / "r"
    events_schema = "k INT, v BIGINT, expires BIGINT"
    _write(
        events,
        "0.json",
        [
            {"k": 1, "v": 1, "expires": 25, "time": 10, "diff": 1},
            {"k": 2, "v": 2, "expires": 99, "time": 10, "diff": 1},
            {"k": None, "v": 3, "expires": 25, "time": 10, "diff": 1},
        ],
    )
    _write(
        right,
        "0.json",
        [
            {"k": 1, "s": "x", "w": "a", "time": 10, "diff": 1},
            {"k": 1, "s": "y", "w": "b", "time": 10, "diff": 1},
        ],
    )
    recent = _spec(
        "SELECT k, v FROM events WHERE mz_now() < expires",
        [
            {
                "name": "events",
                "changelog": {"path": str(events), "format": "json", "schema": events_schema},
                "timeline": {"external": "erp"},
            }
        ],
    )
    join_sql = "SELECT e.v, r.w FROM recent e LEFT JOIN r ON e.k = r.k"
    joined = _spec(
        join_sql, [{"name": "recent", "dataflow": {"name": "recent"}}, _source("r", right)]
    )
    assert plan_query(join_sql, ["recent", "r"]).maintenance.strategy is Strategy.JOIN
    outputs: list[BatchOutput] = []
    engine = Engine(spark, EngineConfig(tmp_path / "state", T), on_output=outputs.append)
    try:
        assert not engine.apply(dataflows_from([("recent", recent), ("joined", joined)])).failed
        later = [
            [{"k": 2, "v": 4, "expires": 99, "time": 20, "diff": 1}],
            [{"k": 1, "v": 5, "expires": 99, "time": 30, "diff": 1}],
        ]
        # r moves on to 30 too (a row nothing matches): the join's output at a time comes
        # once both inputs are complete to it.
        right_later = [
            [{"k": 2, "s": "x", "w": "c", "time": 20, "diff": 1}],
            [{"k": 9, "s": "x", "w": "z", "time": 30, "diff": 1}],
        ]
        for number in range(3):
            if number:
                _write(events, f"{number}.json", later[number - 1])
                _write(right, f"{number}.json", right_later[number - 1])
            for tick in range(2):  # the upstream's batch, then the join's
                engine.step(T + 2 * number + tick)
        emitted = [u for o in outputs if o.dataflow == "joined" for u in o.updates]
        expected = {
            # (time, rows): the join over the filtered events at that time.
            10: Counter({(1, "a"): 1, (1, "b"): 1, (2, None): 1, (3, None): 1}),
            20: Counter({(1, "a"): 1, (1, "b"): 1, (2, "c"): 1, (3, None): 1, (4, "c"): 1}),
            25: Counter({(2, "c"): 1, (4, "c"): 1}),  # k=1 and the NULL key expired at 25
            30: Counter({(2, "c"): 1, (4, "c"): 1, (5, "a"): 1, (5, "b"): 1}),
        }
        for time, rows in expected.items():
            assert _consolidated(emitted, time) == rows, time
        # (2, NULL) gave way to (2, 'c') at 20; the expired rows went at 25, no later.
        assert {u[0] for u in emitted if u[1] < 0} == {20, 25}
    finally:
        engine.close()


def test_explain_shows_the_join_operator_with_node_ids(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sources = [_source(name, tmp_path / name) for name in SCHEMAS]
    for name in SCHEMAS:
        (tmp_path / name).mkdir()
    manifest = {
        "apiVersion": "dataflow.dev/v1alpha1",
        "kind": "Dataflow",
        "metadata": {"name": "joined"},
        "spec": {"cluster": "default", "kind": "Index", "sources": sources, "sql": JOINS["full"]},
    }
    path = tmp_path / "flows.yaml"
    path.write_text(json.dumps(manifest))
    assert main(["explain", str(path), "--node-ids"]) == 0
    lines = capsys.readouterr().out.splitlines()
    operator = [line for line in lines if "TransformWithState" in line]
    assert len(operator) == 1 and "node_id" in operator[0], lines
    assert not any("Recompute" in line or "to_json(named_struct(__input" in line for line in lines)
