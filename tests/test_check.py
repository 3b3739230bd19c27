"""``dataflow-operator check``: broken manifests give one clear line each, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dataflow_operator.cli import main

ROOT = Path(__file__).resolve().parents[1]

REPLICA = """\
apiVersion: dataflow.dev/v1alpha1
kind: Replica
metadata: {name: r1}
spec:
  cluster: default
"""

DATAFLOW = """\
apiVersion: dataflow.dev/v1alpha1
kind: Dataflow
metadata: {name: d1}
spec:
  cluster: default
  kind: Subscribe
  sources:
    - name: events
      table: {path: data/events, schema: "content STRING, event_ts TIMESTAMP"}
  sql: SELECT content FROM events
"""


def dataflow(**replace: str) -> str:
    text = DATAFLOW
    for old, new in replace.items():
        old_text = {
            "sql": "  sql: SELECT content FROM events\n",
            "source": '      table: {path: data/events, schema: "content STRING, event_ts TIMESTAMP"}\n',
        }.get(old, old)
        assert old_text in text, old
        text = text.replace(old_text, new)
    return text


ERP_FLOW = """\
apiVersion: dataflow.dev/v1alpha1
kind: Dataflow
metadata: {name: erp}
spec:
  cluster: default
  kind: Index
  sources:
    - name: orders
      changelog: {path: data/orders, format: json, schema: "id BIGINT"}
      timeline: {external: erp}
  sql: SELECT id FROM orders
"""

BROKEN: dict[str, tuple[str, str]] = {
    "not yaml": ("a: [unclosed\n", "(file): (document): not valid YAML at line 2"),
    "empty file": ("", "(file): (document): no manifests in the file"),
    "a list, not an object": (
        "- a\n- b\n",
        "(document 1): (document): expected a mapping, got a list",
    ),
    "unknown kind": (
        REPLICA.replace("kind: Replica", "kind: Pod"),
        "Pod/r1: kind: unknown kind 'Pod'",
    ),
    "wrong apiVersion": (
        REPLICA.replace("dataflow.dev/v1alpha1", "v1"),
        "Replica/r1: apiVersion: expected dataflow.dev/v1alpha1, got 'v1'",
    ),
    "missing spec": (
        "apiVersion: dataflow.dev/v1alpha1\nkind: Replica\nmetadata: {name: r1}\n",
        "Replica/r1: spec: required field is missing",
    ),
    "missing name": (
        "apiVersion: dataflow.dev/v1alpha1\nkind: Replica\nmetadata: {}\nspec: {cluster: a}\n",
        "Replica/(document 1): metadata.name: required field is missing",
    ),
    "empty cluster": (
        REPLICA.replace("cluster: default", 'cluster: ""'),
        "Replica/r1: spec.cluster: String should have at least 1 character",
    ),
    "cluster not a DNS label": (
        REPLICA.replace("cluster: default", "cluster: Bad_Name"),
        "Replica/r1: spec.cluster: String should match pattern",
    ),
    "unknown field": (REPLICA + "  replicas: 3\n", "Replica/r1: spec.replicas: unknown field"),
    "wrong type": (
        REPLICA + "  driver: {cores: many}\n",
        "Replica/r1: spec.driver.cores: Input should be a valid integer",
    ),
    "bad duration": (
        REPLICA + "  expirationOffset: 3 fortnights\n",
        "Replica/r1: spec.expirationOffset: unknown unit 'fortnights'",
    ),
    "negative duration": (
        REPLICA + "  expirationOffset: -1d\n",
        "Replica/r1: spec.expirationOffset: duration must not be negative",
    ),
    "duration without unit": (
        REPLICA + "  expirationOffset: 30\n",
        "Replica/r1: spec.expirationOffset: duration 30 has no unit",
    ),
    "bad quantity": (
        REPLICA + "  driver: {memory: lots}\n",
        "Replica/r1: spec.driver.memory: expected a Kubernetes quantity",
    ),
    "bad restart policy": (
        REPLICA + "  restartPolicy: {type: Sometimes}\n",
        "Replica/r1: spec.restartPolicy.type: Input should be 'Always', 'OnFailure' or 'Never'",
    ),
    "spark conf key": (
        REPLICA + "  sparkConf: {executor.memory: 2g}\n",
        "Replica/r1: spec.sparkConf: key 'executor.memory' is not a Spark setting",
    ),
    "name not a DNS subdomain": (
        REPLICA.replace("name: r1", "name: D_1!"),
        "Replica/D_1!: metadata.name: 'D_1!' is not a DNS-1123 subdomain: lowercase letters, "
        "digits, '-' and '.', starting and ending with a letter or digit; '!', 'D', '_' not allowed",
    ),
    "dataflow name not a DNS subdomain": (
        DATAFLOW.replace("name: d1", "name: D1"),
        "Dataflow/D1: metadata.name: 'D1' is not a DNS-1123 subdomain",
    ),
    "replica name too long for its Service": (
        REPLICA.replace("name: r1", "name: " + "r" * 57),
        f"Replica/{'r' * 57}: metadata.name: a Replica's name must be at most 56 characters "
        f"(got 57): its driver Service {'r' * 20}…-driver and labels must fit in 63",
    ),
    "schema with an unknown type": (
        dataflow(source='      table: {path: data/events, schema: "content STRNG,, event_ts"}\n'),
        'Dataflow/d1: spec.sources[0].table.schema: column "content": unknown type "STRNG"',
    ),
    "schema with a stray comma": (
        dataflow(source='      table: {path: data/events, schema: "content STRING,, event_ts"}\n'),
        'Dataflow/d1: spec.sources[0].table.schema: expected a column name, got ","',
    ),
    "missing sql": (dataflow(sql=""), "Dataflow/d1: spec.sql: required field is missing"),
    "blank sql": (dataflow(sql="  sql: '  '\n"), "Dataflow/d1: spec: 'sql' is blank"),
    "sql does not parse": (
        dataflow(sql="  sql: SELEC content FROM events\n"),
        "Dataflow/d1: spec.sql: SQL does not parse",
    ),
    "two statements": (
        dataflow(sql="  sql: SELECT 1; SELECT 2\n"),
        "Dataflow/d1: spec.sql: SQL must be exactly one query, found 2 statements",
    ),
    "not a query": (
        dataflow(sql="  sql: DROP TABLE events\n"),
        "Dataflow/d1: spec.sql: SQL must be a query",
    ),
    "unknown relation in sql": (
        dataflow(sql="  sql: SELECT * FROM evnts\n"),
        "Dataflow/d1: spec.sql: SQL reads 'evnts', which is not a declared source (declared: events)",
    ),
    "mz_now() in the select list": (
        dataflow(sql="  sql: SELECT mz_now() FROM events\n"),
        "Dataflow/d1: spec.sql: mz_now() may appear only in WHERE conjuncts, not in the SELECT list",
    ),
    "unknown dataflow kind": (
        dataflow(**{"kind: Subscribe": "kind: Table"}),
        "Dataflow/d1: spec.kind: Input should be 'MaterializedView', 'Index' or 'Subscribe'",
    ),
    "no source kind": (
        dataflow(source=""),
        "Dataflow/d1: spec.sources[0]: give exactly one of table, files, changelog, dataflow, kafka; found none",
    ),
    "two source kinds": (
        dataflow(
            source="      table: {path: a, schema: 'a INT'}\n      files: {path: b, format: json, schema: 'a INT'}\n"
        ),
        "found table, files",
    ),
    "bad file format": (
        dataflow(source="      files: {path: b, format: xml, schema: 'a INT'}\n"),
        "spec.sources[0].files.format: Input should be 'json', 'csv' or 'parquet'",
    ),
    "reserved timeline name": (
        dataflow(
            source="      changelog: {path: b, format: json, schema: 'a INT'}\n      timeline: {user: mz_foo}\n"
        ),
        'spec.sources[0].timeline: unacceptable timeline name "mz_foo"',
    ),
    "malformed timeline": (
        dataflow(
            source="      changelog: {path: b, format: json, schema: 'a INT'}\n      timeline: Wallclock\n"
        ),
        "spec.sources[0].timeline: expected EpochMilliseconds, {user: NAME}, {external: NAME} or {counter: NAME}, got 'Wallclock'",
    ),
    "timeline on a dataflow source": (
        dataflow(source="      dataflow: {name: erp}\n      timeline: EpochMilliseconds\n"),
        "a dataflow source carries the timeline of the dataflow it reads",
    ),
    "unknown upstream dataflow": (
        dataflow(source="      dataflow: {name: nowhere}\n"),
        'Dataflow/d1: spec.sources[0].dataflow.name: source "events" reads dataflow "nowhere", which does not exist in cluster "default"',
    ),
    "sink on a non-view": (
        dataflow(**{"  sql:": "  sink: {path: out}\n  sql:"}),
        "Dataflow/d1: spec: 'sink' is only for MaterializedView, not Subscribe",
    ),
    "duplicate source names": (
        dataflow(
            **{"  sql:": "    - name: events\n      table: {path: x, schema: 'a INT'}\n  sql:"}
        ),
        "spec: source names must be unique; repeated: events",
    ),
    "bad refresh": (
        dataflow(**{"  sql:": "  refresh: {alignedTo: '2026-01-01T00:00:00Z'}\n  sql:"}),
        "spec.refresh: give a non-zero 'every', or 'at' times",
    ),
    "mixed timelines": (
        ERP_FLOW
        + "---\n"
        + dataflow(
            **{
                "  sql: SELECT content FROM events\n": "    - name: totals\n      dataflow: {name: erp}\n  sql: SELECT content FROM events JOIN totals ON true\n"
            }
        ),
        "Dataflow/d1: spec.sources: multiple timelines within one dataflow are not supported",
    ),
    "defined twice": (REPLICA + "---\n" + REPLICA, "Replica/r1: metadata.name: defined twice"),
    "executors on ReadWriteOnce storage": (
        REPLICA + "  storage: {size: 1Gi}\n  executor: {instances: 2}\n",
        "Replica/r1: spec.storage.accessModes: [ReadWriteOnce] lacks ReadWriteMany but "
        "executor.instances is 2: the claim is mounted on every executor too",
    ),
    "executors on an emptyDir": (
        REPLICA + "  executor: {instances: 1}\n",
        "Replica/r1: spec.executor.instances: executor.instances is 1 but neither "
        "spec.storage nor spec.stateUri is set",
    ),
    "storage and stateUri": (
        REPLICA + "  storage: {size: 1Gi}\n  stateUri: s3a://b/p\n",
        "Replica/r1: spec.stateUri: spec.storage and spec.stateUri are mutually exclusive",
    ),
    "stateUri not an object store": (
        REPLICA + "  stateUri: /var/state\n",
        "Replica/r1: spec.stateUri: '/var/state' is not an object-store or HDFS URI",
    ),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_manifest_gives_a_clear_line(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, expected = BROKEN[case]
    path = tmp_path / "manifest.yaml"
    path.write_text(text)
    assert main(["check", str(path)]) == 1
    out = capsys.readouterr().out
    assert "Traceback" not in out
    lines = out.splitlines()
    assert any(line.startswith(f"{path}: ") and expected in line for line in lines), out


def test_there_are_at_least_twenty_kinds_of_broken_manifest() -> None:
    assert len(BROKEN) >= 20


def test_mixed_timelines_detail_names_each_timeline_and_its_sources(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(BROKEN["mixed timelines"][0])
    main(["check", str(path)])
    out = capsys.readouterr().out
    assert "DETAIL: timelines: EpochMilliseconds (events); external:erp (totals)" in out


def test_valid_examples_pass(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(ROOT / "examples")]) == 0


def test_storage_rules_accept_what_reaches_every_pod(tmp_path: Path) -> None:
    path = tmp_path / "ok.yaml"
    path.write_text(
        "---\n".join(
            REPLICA.replace("r1", name) + extra
            for name, extra in [
                ("rwo-local", "  storage: {size: 1Gi}\n  executor: {instances: 0}\n"),
                ("rwx", "  storage: {size: 1Gi, accessModes: [ReadWriteMany]}\n"),
                ("uri", "  stateUri: s3a://bucket/state\n  stateCredentials: creds\n"),
                ("empty-local", "  executor: {instances: 0}\n"),
                ("smallest", ""),  # no storage, no count: Spark inside the driver
                ("seed", "  expirationOffset: 21d\n"),
                ("rwo", "  storage: {size: 1Gi}\n"),
            ]
        )
    )
    assert main(["check", str(path)]) == 0


def test_context_resolves_references_without_reporting_it(tmp_path: Path) -> None:
    applied = tmp_path / "applied.yaml"
    applied.write_text(ERP_FLOW.replace("SELECT id FROM orders", "SELECT id FROM orderz"))
    new = tmp_path / "new.yaml"
    new.write_text(
        ERP_FLOW.replace("name: erp}", "name: downstream}").replace(
            'changelog: {path: data/orders, format: json, schema: "id BIGINT"}\n      timeline: {external: erp}',
            "dataflow: {name: erp}",
        )
    )
    assert main(["check", str(new)]) == 1
    assert main(["check", str(new), "--context", str(applied)]) == 0


def test_missing_file_is_a_line_not_a_traceback(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "dataflow_operator", "check", str(tmp_path / "nope.yaml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1
    assert "nope.yaml: (file): (document): cannot read: No such file or directory" in result.stdout
    assert "Traceback" not in result.stderr
