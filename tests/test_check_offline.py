"""``check`` catches offline what ``run`` would reject on a replica: unknown columns in
the SQL (qualified against the declared schemas, no Spark), reserved and duplicate
column names, and durations too long to add to a time."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from dataflow_operator.cli import main
from dataflow_operator.core.ddl import parse_schema
from dataflow_operator.core.sql_columns import unknown_column
from dataflow_operator.runtime.cli import replica as replica_command

FLOW = """\
apiVersion: dataflow.dev/v1alpha1
kind: Dataflow
metadata: {{name: d1}}
spec:
  cluster: default
  kind: Subscribe
  sources:
    - name: events
      table: {{path: data/events, schema: "{schema}"}}
    - name: users
      files: {{path: data/users, format: csv, schema: "id BIGINT, name STRING"}}
  sql: {sql}
"""
SCHEMA = "content STRING, event_ts TIMESTAMP, user_id BIGINT"
REPLICA = """\
apiVersion: dataflow.dev/v1alpha1
kind: Replica
metadata: {name: r1}
spec: {cluster: default, executor: {instances: 0}, expirationOffset: 99999999999999999999999d}
"""
HUGE = "99999999999999999999999d"

BROKEN = {
    "unknown column": (
        FLOW.format(schema=SCHEMA, sql="SELECT contnt FROM events"),
        "Dataflow/d1: spec.sql: SQL reads column 'contnt' at line 1, column 8, which no source "
        "has; did you mean 'content'?",
    ),
    "unknown column in a join": (
        FLOW.format(
            schema=SCHEMA,
            sql="SELECT e.content, u.nam FROM events e JOIN users u ON e.user_id = u.id",
        ),
        "SQL reads column 'nam'",
    ),
    "unknown column under a temporal filter": (
        FLOW.format(
            schema=SCHEMA,
            sql="\"SELECT content FROM events WHERE mz_now() <= event_time + INTERVAL '1 day'\"",
        ),
        "SQL reads column 'event_time'",
    ),
    "reserved column": (
        FLOW.format(schema="content STRING, __time BIGINT", sql="SELECT content FROM events"),
        'spec.sources[0].table.schema: column "__time": names beginning with "__" are reserved',
    ),
    "duplicate column": (
        FLOW.format(schema="a INT, a STRING", sql="SELECT a FROM events"),
        'spec.sources[0].table.schema: column "a": the column is named twice',
    ),
    "duplicate column in another case": (
        FLOW.format(schema="a INT, A STRING", sql="SELECT a FROM events"),
        'column "A": the column is named twice (as "a" and "A")',
    ),
    "expiration offset too long": (
        REPLICA,
        f"Replica/r1: spec.expirationOffset: duration '{HUGE}' is longer than 36500d",
    ),
    "refresh period too long": (
        FLOW.format(schema=SCHEMA, sql="SELECT content FROM events")
        + "  refresh: {every: 99999999999999999999999d}\n",
        "spec.refresh.every: duration",
    ),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_check_says_what_run_would_reject(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, expected = BROKEN[case]
    path = tmp_path / "m.yaml"
    path.write_text(text)
    assert main(["check", str(path)]) == 1
    out = capsys.readouterr().out
    assert any(line.startswith(f"{path}: ") and expected in line for line in out.splitlines()), out


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT content, count(*) AS n FROM events GROUP BY content",
        "SELECT CONTENT AS c FROM events ORDER BY c",
        "SELECT e.content, u.name FROM events e JOIN users u ON e.user_id = u.id",
        "SELECT k, sum(n) AS s FROM (SELECT content AS k, 1 AS n FROM events) GROUP BY k",
        "WITH a AS (SELECT content FROM events) SELECT content FROM a",
        "SELECT content FROM events WHERE user_id IN (SELECT id FROM users)",
        "SELECT content FROM events WHERE mz_now() <= event_ts + INTERVAL '30 days'",
        "SELECT transform(array(user_id), x -> x + 1) AS t FROM events",
        # the struct column a time window's GROUP BY gives (Nexmark's q5, q7, q11)
        "SELECT user_id, count(*) AS n, window.start AS s FROM events "
        "GROUP BY user_id, window(event_ts, '10 seconds', '2 seconds')",
        "SELECT w.e FROM (SELECT max(user_id) AS m, window.end AS e FROM events "
        "GROUP BY window(event_ts, '10 seconds')) w",
        "SELECT session_window.start AS s, count(*) AS n FROM events "
        "GROUP BY user_id, session_window(event_ts, '10 seconds')",
    ],
)
def test_queries_spark_accepts_are_not_refused(sql: str) -> None:
    schemas = {"events": parse_schema(SCHEMA), "users": parse_schema("id BIGINT, name STRING")}
    assert unknown_column(sql, schemas) is None


def test_a_type_sqlglot_does_not_read_leaves_the_query_to_spark() -> None:
    schemas = {"events": parse_schema("v VOID")}
    assert unknown_column("SELECT nope FROM events", schemas) is None


def test_run_and_replica_refuse_a_huge_expiration_offset_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(FLOW.format(schema=SCHEMA, sql="SELECT content FROM events"))
    with pytest.raises(SystemExit) as exited:
        main(["run", str(path), "--expiration-offset", HUGE])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"argument --expiration-offset: duration '{HUGE}' is longer than 36500d" in err
    assert "Traceback" not in err
    parser = argparse.ArgumentParser()
    replica_command.configure(parser)
    with pytest.raises(replica_command.ConfigError, match="is longer than 36500d"):
        replica_command.ReplicaConfig.resolve(parser.parse_args(["--expiration-offset", HUGE]), {})
