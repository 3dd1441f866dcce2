"""The bench scripts stay runnable as the package changes: every name they import from amd exists, and each runs
to the end at tiny sizes (a smoke run)."""

import ast
import importlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from amd.llm.specs import LOCAL_WEIGHTS

BENCH = Path(__file__).resolve().parents[1] / "bench"


def amd_imports(script: Path) -> list[tuple[str, str]]:
    tree = ast.parse(script.read_text())
    return [(node.module, alias.name) for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "amd"
            for alias in node.names]


@pytest.mark.parametrize("script", sorted(BENCH.glob("bench_*.py")), ids=lambda path: path.name)
def test_every_name_a_bench_script_imports_from_amd_exists(script):
    for module_name, name in amd_imports(script):
        module = importlib.import_module(module_name)
        assert hasattr(module, name) or importlib.util.find_spec(f"{module_name}.{name}"), \
            f"{script.name}: `from {module_name} import {name}` fails"


def test_the_evidence_bench_pairs_each_memory_run_with_zero_shot_over_the_tasks_both_finished(capsys):
    spec = importlib.util.spec_from_file_location("bench_evidence_run", BENCH / "bench_evidence_run.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    script.print_paired({("s", "zero_shot"): {"a": False, "b": True, "c": False},
                         ("s", "wf_st_fn"): {"a": True, "b": True}})  # c not finished with memory: left out
    row = capsys.readouterr().out.strip().splitlines()[-1]
    assert row.startswith("| s | wf_st_fn | 2 | 1 [9.5, 90.5] | 2 [34.2, 100.0] |") and row.endswith("| 1 | 0 | 1 |")


# Every bench script at tiny sizes, run as a user runs it: it must finish with status 0. Placeholders: RUN is a
# small model run file, EMPTY an empty results folder, WORK a scratch folder. The scripts that need a real local
# model, model weights, vLLM on the CPU or whole workflow builds are marked slow (`make test-slow`).
RUN, EMPTY, WORK = "{run}", "{empty}", "{work}"
FAST = {
    "bench_cache.py": ["--tasks", "2"],
    "bench_decode_stop.py": [RUN],
    "bench_delta.py": ["--embedder", "hash:256", "--limit", "12"],
    "bench_embedded_default.py": ["--results", EMPTY],
    "bench_evidence_run.py": ["--results", EMPTY],
    "bench_groups.py": ["--benchmark", "bfcl"],
    "bench_masking.py": ["--embedder", "hash:256"],
    # it builds in the checkout's own results/ and caches, which no test touches: its options only
    "bench_named_targets.py": ["--help"],
    "bench_paper_grid_gpu.py": ["--caps", "16"],
    "bench_pipeline_step.py": ["--tasks", "2", "--rounds", "1"],
    "bench_plan.py": ["--repeats", "1"],
    "bench_rerun_requests.py": ["--tasks", "1"],
    "bench_retrieval.py": ["--entries", "100", "--queries", "10"],
    "bench_step_overhead.py": ["--tasks", "1", "--rounds", "1"],
    "bench_throughput.py": ["--tasks", "4", "--concurrency", "2"],
}
SLOW = {
    "bench_embedding.py": ["--rounds", "1", "--limit", "3"],  # the local MiniLM embedder
    "bench_evidence_tasks.py": [],  # the 1.5B model's weights and server
    "bench_memory_poisoning.py": ["--work", WORK, "--suites", "banking"],  # the local MiniLM embedder
    "bench_served_grid.py": ["--cores", "2", "--run-seconds", "1"],  # a whole workflow of 72 stand-in jobs
    "bench_shared_server.py": ["--cells", "1", "--tasks-per-cell", "1"],  # vLLM on the CPU
    "bench_vllm_cpu.py": [],  # vLLM on the CPU
}


def test_every_bench_script_has_a_smoke_run():
    assert set(FAST) | set(SLOW) == {path.name for path in BENCH.glob("bench_*.py")}


def model_run(folder) -> str:
    """A one-step run file of a model agent: a JSON call followed by text the decoding could have saved."""
    record = {"turns": [{"steps": [{"model_text": '{"name": "ls", "arguments": {}} and then some more text',
                                    "tokens": {"prompt": 10, "completion": 20}}]}]}
    path = folder / "run.jsonl"
    path.write_text(json.dumps(record) + "\n")
    return str(path)


def run_script(name: str, arguments: list[str], tmp_path) -> None:
    (tmp_path / "empty").mkdir()
    filled = [argument.format(run=model_run(tmp_path) if argument == RUN else "", empty=tmp_path / "empty",
                              work=tmp_path / "work") for argument in arguments]
    env = {**os.environ, "AMD_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(BENCH.parent)}
    done = subprocess.run([sys.executable, str(BENCH / name), *filled], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600, check=False)
    assert done.returncode == 0, f"{name}: {done.stderr[-3000:]}"
    assert done.stdout.strip(), f"{name} printed nothing"


@pytest.mark.parametrize("name", sorted(FAST))
def test_a_bench_script_runs_at_tiny_sizes(name, tmp_path):
    run_script(name, FAST[name], tmp_path)


# The scripts that need a local model beyond the embedded default's, whose weights `make test-slow` does not install.
WEIGHTS = {"bench_evidence_tasks.py": "qwen2.5-coder-1.5b"}


def weights_installed(model: str) -> bool:
    weights = LOCAL_WEIGHTS[model]
    return importlib.util.find_spec(f"{weights.module_prefix}1") is not None


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SLOW))
def test_a_bench_script_that_needs_models_runs_at_tiny_sizes(name, tmp_path):
    model = WEIGHTS.get(name)
    if model and not weights_installed(model):
        pytest.skip(f"{name} needs the {model} weights: `make {LOCAL_WEIGHTS[model].make_target}` installs them")
    run_script(name, SLOW[name], tmp_path)
