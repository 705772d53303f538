# make demo | make test | make check | make lint | make ui — each creates .venv when it is missing.
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export DAGSTER_HOME := $(CURDIR)/.dagster_home
# `dg` checks that the active venv is the project's; make runs .venv's binaries directly
export VIRTUAL_ENV := $(CURDIR)/$(VENV)
export PYTHONUNBUFFERED := 1

.PHONY: demo test check lint format ui install browser clean

#: pytest-xdist workers of `make test`: the suite mostly waits (on Postgres, Chroma, the Dagster
#: daemon, a browser), so three workers keep two cores busy; the Ray tests share one worker, and
#: so do the tests of a module with a module-scoped fixture (xdist_group, conftest.py), handed out
#: in conftest.py's order (--no-loadscope-reorder): the slow groups first.
TEST_WORKERS ?= 3
#: The test runs leave nothing running: an interrupted one (Ctrl-C, a CI timeout's SIGTERM) tears
#: its fixtures down, then whatever the run started and left (embedded Postgres, Chroma, dg dev and
#: its daemon, Ray, the browser) is stopped by its run marker (.ci/with-reaper).
REAPED := REAP_PYTHON=$(BIN)/python bash .ci/with-reaper

install: $(STAMP) $(DAGSTER_HOME)/dagster.yaml

# constraints.txt pins torch to the CPU wheel on local disk and every other package to the set
# verified to co-install here. The extras: `pipeline` (Dagster, the stores' writers, the CLI),
# `onnx` (the query model's runtime), `dev` (the test tools); the core alone is the app's read
# path (docs/APP.md, "Installing the app side").
$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e '.[pipeline,onnx,dev]'
	touch $@

$(DAGSTER_HOME)/dagster.yaml: dagster.yaml
	mkdir -p $(DAGSTER_HOME)
	cp dagster.yaml $@

# Debian's chromium + chromedriver for the UI tests; the same idempotent script CI runs (it does
# nothing when both are installed).
browser:
	bash .ci/install-browser

demo: install
	$(BIN)/candlefire demo

test: install browser
	$(REAPED) $(BIN)/pytest -q -ra --durations=15 -n $(TEST_WORKERS) --dist loadgroup \
		--no-loadscope-reorder $(PYTEST_ARGS)

# The inner loop before a commit: lint, then every test that starts no server or process and
# loads no model (marker `server`, conftest.py).
check: lint
	$(REAPED) $(BIN)/pytest -q -ra -m "not server" -n 2 $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/dg check defs

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

ui: install
	$(BIN)/dg dev

clean:
	rm -rf $(DAGSTER_HOME) data/batches data/cache data/chroma data/qdrant data/reports data/logs \
		data/serving_backend.json data/serving_backend.json.lock \
		data/serving_history_pending.jsonl data/ingested_drops.json data/ingested_drops.json.lock
