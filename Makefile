# dataflow-operator — the two entry points are `make run` and `make test`.
# Both create .venv and install the project into it when it is missing or stale.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
EXAMPLES ?= examples/last-30-days.yaml
export SPARK_LOCAL_IP ?= 127.0.0.1

.PHONY: install test test-fast test-wide pytest lint format crds crds-check run chart kustomize argocd e2e clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --no-compile -e '.[dev]'
	@# byte-compiled on both cores (pip compiles on one); a file that does not compile is
	@# only left to be compiled when imported, as pip leaves it
	$(BIN)/python -m compileall -qq -j 0 $(VENV)/lib || true
	$(BIN)/python tools/install_k8s_tools.py $(BIN) >/dev/null
	@# Spark's classes archived once, so that every later driver JVM starts faster
	@# (docs/cli.md); a failure leaves drivers starting as they would without it
	DATAFLOW_LOG_LEVEL=WARNING $(BIN)/dataflow-operator class-archive \
	  || echo "class-archive failed: drivers start without it"
	touch $(STAMP)

## test: everything CI runs — static checks, then the whole test suite in two lanes, one
## after the other (tools/test_lanes.py: the rest, then the Spark tests; e2e skips without kind).
test: lint pytest

## test-fast: the inner loop — every test but those marked slow, with the static checks
## beside them at a lower priority: the spark lane is what the inner loop waits for.
test-fast: $(STAMP)
	$(BIN)/python tools/test_lanes.py --fast --beside "$(MAKE) --no-print-directory lint"

## test-wide: the whole suite with the fuzz and soak cases run wide (more seeds, examples, kills).
test-wide: lint
	DATAFLOW_TEST_WIDE=1 $(BIN)/python tools/test_lanes.py

pytest: $(STAMP)
	$(BIN)/python tools/test_lanes.py

## lint: ruff, mypy and the import-linter layer contracts.
lint: $(STAMP)
	$(BIN)/ruff check operator tests bench e2e tools
	$(BIN)/ruff format --check operator tests bench e2e tools
	$(BIN)/lint-imports
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff format operator tests bench e2e tools
	$(BIN)/ruff check --fix operator tests bench e2e tools

## crds: regenerate crds/, the chart's crds/ and the kustomize base (which holds them) from the models.
crds: $(STAMP)
	$(BIN)/dataflow-operator crds
	$(BIN)/python tools/render_kustomize.py $(BIN)

crds-check: $(STAMP)
	$(BIN)/dataflow-operator crds --check

## run: the main job — a local replica running the example dataflows.
run: $(STAMP)
	$(BIN)/dataflow-operator check $(EXAMPLES)
	rm -rf data/events state/demo
	@echo "--- one event of 2026-01-01: it is in the last 30 days until 2026-01-31"
	$(BIN)/dataflow-operator insert data/events '{"content": "hello", "event_ts": "2026-01-01T00:00:00Z"}'
	@echo "--- replica r1 from 2026-01-01, one batch per simulated day; it expires after 21 days (exit 75)"
	@echo "--- stdout: TIME(ms) DIFF event_ts content; stderr: the days passing"
	$(BIN)/dataflow-operator run $(EXAMPLES) --state-dir state/demo --clock simulated --tick 1d \
	  --start-time 2026-01-01T00:00:00Z --until 2026-02-01T00:00:00Z || test $$? -eq 75
	@echo "--- restarted at its expiration: it resumes; on 2026-01-31 the event leaves the window (DIFF -1)"
	$(BIN)/dataflow-operator run $(EXAMPLES) --state-dir state/demo --clock simulated --tick 1d \
	  --start-time 2026-01-22T00:00:00Z --until 2026-02-01T00:00:00Z

## chart: lint the Helm chart and render it with the default values.
chart: $(STAMP)
	$(BIN)/helm lint charts/dataflow-operator
	$(BIN)/helm template dataflow-operator charts/dataflow-operator >/dev/null

## kustomize: regenerate deploy/kustomize/ (plain manifests) from the chart.
kustomize: $(STAMP)
	$(BIN)/python tools/render_kustomize.py $(BIN)

## argocd: regenerate deploy/argocd/argocd-cm.yaml from the health.lua scripts.
argocd: $(STAMP)
	$(BIN)/python tools/render_argocd_cm.py

## e2e: the kind suite (skips, saying why, where kind or Docker is absent).
e2e: $(STAMP)
	$(BIN)/python -m pytest -n 0 e2e

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache spark-warehouse metastore_db
