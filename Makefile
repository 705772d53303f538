# make demo | make test | make lint | make ui — each creates .venv when it is missing.
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export DAGSTER_HOME := $(CURDIR)/.dagster_home
export PYTHONUNBUFFERED := 1

.PHONY: demo test lint format ui install clean

install: $(STAMP) $(DAGSTER_HOME)/dagster.yaml

# constraints.txt pins torch to the CPU wheel on local disk and every other package to the set
# verified to co-install here.
$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e '.[dev]'
	touch $@

$(DAGSTER_HOME)/dagster.yaml: dagster.yaml
	mkdir -p $(DAGSTER_HOME)
	cp dagster.yaml $@

demo: install
	$(BIN)/candlefire demo

test: install
	$(BIN)/pytest -q -ra --durations=15 $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

ui: install
	$(BIN)/dagster dev -m candlefire_pipeline.definitions

clean:
	rm -rf $(DAGSTER_HOME) data/batches data/cache data/chroma data/qdrant data/reports data/serving_backend.json
