# dfcompass: `make demo` and `make test` set everything up on a fresh Debian machine.
# Every step is idempotent: it checks before it installs.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.dfcompass-installed
OUT ?= demo-out
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
PYTEST_ARGS ?=

.PHONY: help setup apt venv demo test test-fast typecheck bench fuzz clean

help:
	@echo "make demo      - set up, record the embedded workload, print its summary"
	@echo "make test      - set up, type-check (mypy), run the whole test suite (what CI runs)"
	@echo "make typecheck - set up, type-check tracer/ and tc_analyses/ (mypy, settings in pyproject.toml)"
	@echo "make test-fast - set up, run the tests not marked slow, torch or tf (under a minute)"
	@echo "make bench     - set up, run the benchmarks (ratios side by side)"
	@echo "make fuzz      - set up, fuzz every input kind (10,000 cases), SIGKILL a recorded torch loop 20 times"

setup: apt $(STAMP)

# System packages: babeltrace2 (CLI), python3-bt2 (bindings), python3-venv; g++ and ninja-build
# compile the recorder's C++ part (tracer/native); chromium opens the HTML report headless in a
# test (and makes the screenshot in docs/).
apt:
	@if command -v babeltrace2 >/dev/null && /usr/bin/python3 -c 'import bt2' 2>/dev/null \
	    && /usr/bin/python3 -c 'import venv, ensurepip' 2>/dev/null && command -v g++ >/dev/null \
	    && command -v ninja >/dev/null; then \
	  echo "setup: babeltrace2, python3-bt2, g++ and ninja already installed"; \
	else \
	  echo "setup: installing babeltrace2 python3-bt2 python3-venv g++ ninja-build with apt"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq babeltrace2 python3-bt2 python3-venv g++ ninja-build; \
	fi
	@# chromium only opens the report in a test (skipped without it): its failure warns, never stops set-up
	@command -v chromium >/dev/null || { echo "setup: installing chromium with apt (headless, for the report's test)"; \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends chromium \
	  || { $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq \
	       --no-install-recommends chromium; } \
	  || echo "setup: warning: chromium could not be installed; the report's browser test will skip"; }

$(VPY):
	$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), f"dfcompass needs Python 3.11 (bt2 is built for it), found {sys.version}"'
	$(PYTHON) -m venv $(VENV)

# Reinstall when the project metadata changes; the bt2 link is checked every time.
$(STAMP): pyproject.toml | $(VPY)
	$(VPY) -m pip install -q --upgrade pip==25.3
	$(VPY) -m pip install -q -e '.[dev,tf]'
	@touch $@

venv: $(STAMP)

setup: link-bt2 native
.PHONY: link-bt2 native
link-bt2: $(STAMP)
	@$(VPY) scripts/link_bt2.py

# The recorder's C++ part, built for the installed torch (skipped when built): without it,
# recording takes the Python walk, which gives the same trace more slowly.
native: $(STAMP)
	@$(VPY) -m tracer.native build || true

demo: setup
	$(VENV)/bin/dfcompass demo -o $(OUT)

# mypy reads its settings (files, strictness) from pyproject.toml.
typecheck: setup
	$(VPY) -m mypy

test: typecheck
	$(VPY) -m pytest $(PYTEST_ARGS)

# The markers (slow, torch, shared) are declared in pyproject.toml; docs/architecture.md lists them.
test-fast: setup
	$(VPY) -m pytest -m "not slow and not torch and not tf" $(PYTEST_ARGS)

bench: setup
	$(VPY) bench/run.py

# 10,000 seeded damaged inputs (dfcompass and LTTng traces, Kineto JSON, XML analyses) through the
# commands that read them, counted by outcome; then 20 SIGKILLs of a recorded torch training loop.
fuzz: setup
	$(VPY) scripts/fuzz.py 10000
	$(VPY) scripts/crash_torch.py 20

clean:
	rm -rf $(OUT) bench/out .pytest_cache
