# Everything runs from the repository root with the project's private virtualenv.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Two installs in one virtualenv: what running fetcher needs (make run, make walkthrough-db),
# and that plus the development tools (make test, lint, chaos: pyproject's `dev` extra).
RUN_STAMP := $(VENV)/.installed-run
STAMP := $(VENV)/.installed

.PHONY: run test check lint services services-stop clean bench walkthrough-db chaos mutation console-screenshots

$(RUN_STAMP): pyproject.toml
	@echo "==> setting up $(VENV) to run fetcher: about 90 packages (~270 MB), 1-2 minutes on a fresh machine"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install --progress-bar on -e .
	touch $(RUN_STAMP)
	@echo "==> $(VENV) is ready to run"

$(STAMP): pyproject.toml
	@echo "==> setting up $(VENV) with the development tools: about 120 packages (~590 MB), 2-4 minutes on a fresh machine"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install --progress-bar on -e ".[dev]"
	touch $(STAMP) $(RUN_STAMP)
	@echo "==> $(VENV) is ready"

## Set up and run the service on its embedded default (127.0.0.1:4006, data in ./var).
run: $(RUN_STAMP)
	$(BIN)/fetcher serve

## The README walk-through's table, in a PostgreSQL you can write to (default: the local one).
WALKTHROUGH_DB ?= postgresql://postgres@127.0.0.1:5432/test
walkthrough-db: $(RUN_STAMP)
	$(BIN)/python deploy/walkthrough_db.py "$(WALKTHROUGH_DB)"

## Set up, start the extra test servers, run the whole suite.
test: $(STAMP) services
	eval "$$(bash deploy/services.sh env)" && $(BIN)/pytest -q

## The chaos test at full size (the suite runs a reduced one); override any CHAOS_* knob,
## e.g. `make chaos CHAOS_JOBS=1000` (tests/e2e/test_chaos.py lists them).
CHAOS_JOBS ?= 600
CHAOS_SUBMIT_SECONDS ?= 240
CHAOS_WORKER_KILLS ?= 5
CHAOS_BROKER_CUTS ?= 3
CHAOS_STORAGE_RESTARTS ?= 1
CHAOS_DATABASE_CUTS ?= 1
CHAOS_SETTLE_SECONDS ?= 600
chaos: $(STAMP) services
	eval "$$(bash deploy/services.sh env)" && CHAOS_JOBS=$(CHAOS_JOBS) \
	  CHAOS_SUBMIT_SECONDS=$(CHAOS_SUBMIT_SECONDS) CHAOS_WORKER_KILLS=$(CHAOS_WORKER_KILLS) \
	  CHAOS_BROKER_CUTS=$(CHAOS_BROKER_CUTS) CHAOS_STORAGE_RESTARTS=$(CHAOS_STORAGE_RESTARTS) \
	  CHAOS_DATABASE_CUTS=$(CHAOS_DATABASE_CUTS) CHAOS_SETTLE_SECONDS=$(CHAOS_SETTLE_SECONDS) \
	  $(BIN)/pytest -q -s -p no:randomly tests/e2e/test_chaos.py

## Mutation testing of the security- and integrity-critical modules (not part of `make test`;
## tens of minutes). Pick targets with `make mutation MUTATION_ONLY="lease plugin"`.
MUTATION_ONLY ?=
mutation: $(STAMP)
	$(BIN)/python -m pip install -q -e ".[dev,mutation]"
	nice -n 10 $(BIN)/python tests/mutation/run.py $(if $(MUTATION_ONLY),--only $(MUTATION_ONLY),)

## The console's screenshots in the docs, taken by its browser test against `fetcher serve`.
console-screenshots: $(STAMP) services
	FETCHER_CONSOLE_SHOTS=$(CURDIR)/docs/images/console $(BIN)/pytest -q -p no:randomly tests/e2e/test_console.py

services:
	bash deploy/system-packages.sh
	bash deploy/services.sh start

services-stop:
	bash deploy/services.sh stop

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/deptry .
	$(BIN)/lint-imports
	$(BIN)/mypy

check: lint test

clean:
	rm -rf $(VENV) .ci-state var .pytest_cache .mypy_cache .ruff_cache
