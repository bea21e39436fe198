# Everything runs from the repository root with the project's private virtualenv.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test check lint services services-stop clean bench walkthrough-db

$(STAMP): pyproject.toml
	@echo "==> setting up $(VENV): about 70 packages, 2-3 minutes on a fresh machine"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install --progress-bar on -e ".[dev]"
	touch $(STAMP)
	@echo "==> $(VENV) is ready"

## Set up and run the service on its embedded default (127.0.0.1:4006, data in ./var).
run: $(STAMP)
	$(BIN)/fetcher serve

## The README walk-through's table, in a PostgreSQL you can write to (default: the local one).
WALKTHROUGH_DB ?= postgresql://postgres@127.0.0.1:5432/test
walkthrough-db: $(STAMP)
	$(BIN)/python deploy/walkthrough_db.py "$(WALKTHROUGH_DB)"

## Set up, start the extra test servers, run the whole suite.
test: $(STAMP) services
	eval "$$(bash deploy/services.sh env)" && $(BIN)/pytest -q

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
