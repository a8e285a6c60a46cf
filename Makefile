# The two commands: `make run` and `make test`. Both create .venv when it is missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Debian's Chromium, for the console's browser tests (Playwright drives it; nothing else
# is downloaded). Installed with apt-get, through sudo when not root.
CHROMIUM := /usr/bin/chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_CHROMIUM := $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium

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

$(CHROMIUM):
	$(APT_CHROMIUM) || ($(SUDO) apt-get update -qq && $(APT_CHROMIUM))

test: $(VENV)/.installed-dev $(CHROMIUM)
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
