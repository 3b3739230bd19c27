"""docs/control-api.md is generated from the protocol models, and its ``PUT /dataflows``
example is a body the real route accepts."""

from __future__ import annotations

import http.client
import json
import re
import subprocess
import sys
from pathlib import Path

from dataflow_operator.api.protocol import InstallResult
from dataflow_operator.api.protocol_doc import example_desired_dataflows, render_control_api
from dataflow_operator.runtime.serve import ControlServer
from tests.runtime.fake_replica import FakeReplica

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "control-api.md"


def test_the_page_on_disk_is_the_generated_one() -> None:
    assert PAGE.read_text() == render_control_api(), "run `make crds` (dataflow-operator crds)"


def test_crds_check_reports_the_page_when_it_drifts(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "control-api.md").write_text("# edited by hand\n")
    for page in ("reference.md", "replica-environment.md"):
        (tmp_path / "docs" / page).write_text((ROOT / "docs" / page).read_text())
    for directory in ("crds", "charts/dataflow-operator/crds"):
        (tmp_path / directory).mkdir(parents=True)
        for crd in (ROOT / directory).glob("*.yaml"):
            (tmp_path / directory / crd.name).write_text(crd.read_text())
    result = subprocess.run(
        [sys.executable, "-m", "dataflow_operator", "crds", "--check"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "docs/control-api.md: out of date with dataflow_operator.api; run `make crds`"
    )


def test_the_documented_example_is_accepted_by_the_route(tmp_path: Path) -> None:
    body = re.search(r"```json\n(.*?)\n```", PAGE.read_text().split("## `PUT /dataflows`")[1], re.S)
    assert body is not None
    document = json.loads(body.group(1))
    assert document == example_desired_dataflows().to_wire()
    with ControlServer(FakeReplica(tmp_path), "127.0.0.1:0", clock=lambda: 0) as server:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        try:
            connection.request("PUT", "/dataflows", body=json.dumps(document).encode())
            response = connection.getresponse()
            answer = response.read()
        finally:
            connection.close()
    assert response.status == 200, answer
    assert InstallResult.model_validate_json(answer).installed == ["order-totals"]
