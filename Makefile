# The two commands: `make run` and `make test`. Both create .venv when it is missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test lint bench bench-quick clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed-run: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@ $(VENV)/.installed-run

run: $(VENV)/.installed-run
	$(BIN)/bucketd serve --config bucketd.dev.toml --host 127.0.0.1 --port 8080 --data-dir ./data

test: $(VENV)/.installed-dev
	$(BIN)/python -m pytest

$(VENV)/.installed-bench: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	touch $@ $(VENV)/.installed-dev $(VENV)/.installed-run

bench: $(VENV)/.installed-bench
	$(BIN)/python -m benchmarks

bench-quick: $(VENV)/.installed-bench
	$(BIN)/python -m benchmarks --quick

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check gateway storage bucketd_client tests benchmarks
	$(BIN)/ruff format --check gateway storage bucketd_client tests benchmarks
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build *.egg-info
