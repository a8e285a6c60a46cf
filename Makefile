# The two commands: `make run` and `make test`. Both create .venv when it is missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Debian's Chromium headless shell, for the console's browser tests (Playwright drives it;
# nothing else is downloaded), Debian's HAProxy, the load balancer in front of three
# gateways in tests/test_load_balancer.py, and podman with the runc runtime and mmdebstrap,
# which build and run the container image in tests/test_container.py (mmdebstrap makes its
# base image: no image registry is needed). Installed with apt-get, through sudo when not
# root; each tool is the program's path and its package's name, and the missing ones are
# installed by one apt-get (runc named beside podman: podman's package takes whichever
# runtime is there).
# fuse3 (fusermount3 and libfuse3, which mfusepy loads) mounts the power-loss tests' file
# system that forgets unsynced writes (tests/support/lazyfs.py).
SYSTEM_TOOLS := /usr/bin/chromium-headless-shell:chromium-headless-shell /usr/sbin/haproxy:haproxy /usr/sbin/runc:runc \
	/usr/bin/podman:podman /usr/bin/mmdebstrap:mmdebstrap /usr/bin/fusermount3:fuse3
MISSING_PACKAGES = $(strip $(foreach tool,$(SYSTEM_TOOLS),$(if $(wildcard $(firstword $(subst :, ,$(tool)))),,$(lastword $(subst :, ,$(tool))))))
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_INSTALL := $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends

.PHONY: run test test-fast lint client bench bench-quick clean dist system-tools

# Python writes its bytecode caches (__pycache__/) for everything these targets run, even
# where the environment says not to (some CI images and sandboxes set
# PYTHONDONTWRITEBYTECODE=1): without them every server, CLI process and pytest worker
# compiles bucketd's modules and rewrites the tests' asserts again, a fifth of a second per
# process start and seconds per worker.
unexport PYTHONDONTWRITEBYTECODE

# The venv's packages are installed by uv (from PyPI, like pip, into the same venv): on a
# fresh machine it resolves, downloads and installs the dev set in about 12 s where pip took
# 30 s, a tenth of `make test` on a clean clone; pip stays in the venv for users' own use.
INSTALL := $(BIN)/uv pip install --quiet --python $(BIN)/python

# The venv is made without pip; the system's pip puts uv in it (`--python`, pip 22.3 and
# later) and uv then puts pip in: on a fresh clone the dev venv is ready in 6.4 s, not 9.3
# (ensurepip unpacking and installing pip took 3 s of CPU). Without a system pip that can,
# the venv gets its pip from ensurepip and uv from that pip, as before.
$(BIN)/python:
	$(PYTHON) -m venv --without-pip $(VENV)

$(BIN)/uv: | $(BIN)/python
	$(PYTHON) -m pip --python $(BIN)/python install --quiet uv 2>/dev/null || \
		($(BIN)/python -m ensurepip --default-pip && $(BIN)/python -m pip install --quiet uv)
	$(BIN)/uv pip install --quiet --python $(BIN)/python pip

$(VENV)/.installed-run: pyproject.toml | $(BIN)/uv
	$(INSTALL) -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/uv
	$(INSTALL) -e '.[dev]'
	touch $@ $(VENV)/.installed-run $(VENV)/.installed-dist

# `make run PORT=8081 S3_PORT=9001 DATA=/srv/bucketd`, given on make's command line (a PORT
# that merely sits in the environment is some other program's); without them bucketd reads
# BUCKETD_PORT, BUCKETD_S3_PORT and BUCKETD_DATA_DIR itself, else 8080, 9000 and ./data.
given = $(if $(filter command line,$(origin $(1))),$(2) '$($(1))')
run: $(VENV)/.installed-run
	$(BIN)/bucketd serve --config gateway/dev.toml $(call given,DATA,--data-dir) \
		$(call given,PORT,--port) $(call given,S3_PORT,--s3-port)

system-tools:
	$(if $(MISSING_PACKAGES),$(APT_INSTALL) $(MISSING_PACKAGES) || ($(SUDO) apt-get update -qq && $(APT_INSTALL) $(MISSING_PACKAGES)))

# Both cores, four workers: the tests wait on servers, sockets and disks more than they
# compute (2026-11-27, on a quiet machine: three workers 290 s and 470 s of CPU, 1.62 cores
# busy; four 269 s and 498 s, 1.85 cores; five 278 s and 527 s). The tests whose bounds are
# clock-tight (body deadlines, a key's stream ending, half-open connections, a stall
# between publish and commit: marked `serial`) run last, once every other test is done,
# one per worker (tests/support/scheduling.py). Outages, crashes and restarts whose bounds
# hold under load run among the others, where their waits overlap other workers' CPU.
# HYPOTHESIS_PROFILE: ci (default: full budgets, derandomized), dev, thorough.
PYTEST_PARALLEL := -n 4 --dist loadfile --no-loadscope-reorder

# A fresh clone has no bytecode: each xdist worker would compile bucketd and rewrite the
# tests' asserts itself, all four at once (7.2 s of CPU each; 1.7 s once the caches are
# written). Two collections side by side, half the modules each, write the caches first;
# on a checkout that has them they cost two seconds. Their output is dropped: the run
# itself reports a module that does not import.
PRIME_CACHES = $(BIN)/python -m pytest -q --collect-only -p no:cacheprovider tests/test_[a-o]*.py \
	>/dev/null 2>&1 & $(BIN)/python -m pytest -q --collect-only -p no:cacheprovider \
	tests/test_[p-z]*.py >/dev/null 2>&1; wait

# The venv and the system tools are fetched side by side (on a clean machine both wait on
# the network).
test:
	$(MAKE) --no-print-directory -j2 $(VENV)/.installed-dev system-tools
	$(PRIME_CACHES)
	$(BIN)/python -m pytest $(PYTEST_PARALLEL) --durations=20

# Day-to-day: no slow tests (clusters, browsers, CLI processes, outages, the serial ones),
# a quarter of the Hypothesis budgets.
test-fast: $(VENV)/.installed-dev
	$(PRIME_CACHES)
	HYPOTHESIS_PROFILE=dev $(BIN)/python -m pytest $(PYTEST_PARALLEL) -m "not slow"

$(VENV)/.installed-bench: pyproject.toml | $(BIN)/uv
	$(INSTALL) -e '.[bench]'
	touch $@ $(VENV)/.installed-dev $(VENV)/.installed-run $(VENV)/.installed-dist

bench: $(VENV)/.installed-bench
	$(BIN)/python -m benchmarks

bench-quick: $(VENV)/.installed-bench
	$(BIN)/python -m benchmarks --quick

# dist/bucketd-VERSION.tar.gz and dist/bucketd-VERSION-py3-none-any.whl, what `pip install`
# takes in place of a registry (bucketd is not published on one). It needs PyPA's build and
# the setuptools pyproject.toml names, not the dev dependencies (browsers' drivers, servers).
$(VENV)/.installed-dist: | $(BIN)/python
	$(BIN)/python -m pip install --quiet 'build>=1.2' 'setuptools>=77'
	touch $@

dist: $(VENV)/.installed-dist
	rm -rf dist
	$(BIN)/python -m build --no-isolation --outdir dist .

# The synchronous client, written from the asynchronous one (a test checks it is current).
client: $(VENV)/.installed-dev
	$(BIN)/python contrib/unasync_client.py

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check gateway storage bucketd_client bucketd tests benchmarks
	$(BIN)/ruff format --check gateway storage bucketd_client bucketd tests benchmarks
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build dist *.egg-info
