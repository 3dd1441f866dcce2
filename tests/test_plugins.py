"""Plug-in points: a toy benchmark and a toy memory method, added to a copy of the tree as new modules plus
registry lines only, run through `amd run` and through the Snakemake workflow for real (a scripted model server
plays the student), and nothing else in the code changed for them."""

import filecmp
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from replay_model import OBSERVATION_PREFIX
from scripted_server import ScriptedServer

REPO = Path(__file__).resolve().parents[1]
PLUGINS = Path(__file__).resolve().parent / "plugins"
NEW_MODULES = {"amd/benchmarks/counter.py": "counter.py", "amd/memory/random_k.py": "random_k.py"}
NOTE = "random_note"


def tracked_files() -> list[str]:
    listed = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    return [line for line in listed.splitlines() if (REPO / line).is_file()]


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """A copy of the tracked tree with the two plug-ins added, an `amd` on PATH running that copy, and an env."""
    root = tmp_path_factory.mktemp("plugins")
    tree = root / "tree"
    for name in tracked_files():
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, tree / name)
    for target, source in NEW_MODULES.items():
        shutil.copy(PLUGINS / source, tree / target)
    with open(tree / "amd/registry.py", "a", encoding="utf-8") as handle:
        handle.write((PLUGINS / "registry_lines.txt").read_text())
    bin_dir = root / "bin"
    bin_dir.mkdir()
    (bin_dir / "amd").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m amd.cli "$@"\n')
    (bin_dir / "amd").chmod(0o755)
    env = os.environ | {"PYTHONPATH": str(tree), "AMD_CACHE_DIR": str(root / "cache"),
                        "PATH": f"{bin_dir}:{Path(sys.executable).parent}:{os.environ['PATH']}"}
    return tree, env


def counting_student(request):
    """Calls add(n=1) once per user turn, then closes the turn."""
    last = request["messages"][-1]
    if last["role"] == "user" and last["content"].startswith(OBSERVATION_PREFIX):
        return "Done."
    return '{"name": "add", "arguments": {"n": 1}}'


def amd(tree, env, *argv):
    done = subprocess.run(["amd", *argv], check=False, cwd=tree, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def read_jsonl(path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def assert_notes_from_other_groups(records, k):
    for record in records:
        notes = record["system_memory"]
        assert len(notes) == k and all(note["type"] == NOTE for note in notes), record["task_id"]
        groups = {note["source_task_id"].rsplit("_", 1)[0] for note in notes}
        assert record["task_group"] not in groups, record["task_id"]  # never a variant of its own scenario


def test_a_toy_benchmark_and_memory_method_run_through_amd_run(tree):
    tree, env = tree
    amd(tree, env, "run", "counter", "--agent", "oracle", "--out", "teacher.jsonl", "--no-progress")
    built = amd(tree, env, "memory", "build", "--method", "random_k", "--trajectories", "teacher.jsonl",
                "--embedder", "hash:32", "--out", "bank")
    assert '"random_note": 6' in built.stdout
    assert json.loads((tree / "bank/manifest.json").read_text())["method"] == {"name": "random_k", "version": "1"}
    with ScriptedServer(counting_student) as server:
        amd(tree, env, "run", "counter", "--agent", f"vllm:student@{server.url}", "--memory", "bank",
            "--memory-config", "random_k", "--k", "rk=2", "--out", "student.jsonl", "--no-progress")
        prompts = [request.body["messages"][0]["content"] for request in server.chat_requests()]
    records = read_jsonl(tree / "student.jsonl")
    assert len(records) == 6 and all(record["success"] for record in records)
    assert all(record["memory"]["method"] == "random_k" and record["memory"]["k"] == {NOTE: 2} for record in records)
    assert_notes_from_other_groups(records, k=2)
    assert all("Notes from other tasks:" in prompt for prompt in prompts)


def toy_config(student_url: str) -> dict:
    return {
        "benchmarks": {"counter": {"teacher_tasks": None, "student_tasks": None}},
        "run": {"max_steps_per_turn": 4, "max_steps": 12, "temperature": 0.0, "max_tokens": 64, "concurrency": 2},
        "teachers": {"oracle": {"spec": "oracle"}},
        "writers": {"rules": {"spec": "rules"}},
        "embedders": {"hashed": {"spec": "hash:32"}},
        "representations": {"plain": {}},
        "students": {"scripted": {"spec": f"vllm:student@{student_url}"}},
        "defaults": {"teacher": "oracle", "writer": "rules", "embedder": "hashed", "representation": "plain",
                     "protocol": "self_excluded", "k": {"rk": 3}, "delta": {}, "split_seed": 0, "seeds": [0]},
        "experiments": {"toy": {"benchmarks": ["counter"], "students": ["scripted"],
                                "memory_configs": ["zero_shot", "random_k"], "outputs": ["table2_ablation"]}},
        "note": "toy plug-ins",
    }


def test_the_toy_plugins_run_through_the_snakemake_workflow(tree):
    tree, env = tree
    snakemake = Path(sys.executable).parent / "snakemake"
    with ScriptedServer(counting_student) as server:
        (tree / "config/config.yaml").write_text(yaml.safe_dump(toy_config(server.url)))
        done = subprocess.run([str(snakemake), "--cores", "2", "all"], check=False, cwd=tree, env=env,
                              capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    memory_run = tree / "results/counter/student-scripted/oracle-rules-hashed-plain/random_k/self_excluded/k_rk3/seed0"
    assert (tree / "results/counter/bank/random_k/oracle-rules-hashed-plain/manifest.json").exists()
    assert_notes_from_other_groups(read_jsonl(memory_run / "trajectories.jsonl"), k=3)
    table = (tree / "results/tables/table2_ablation.md").read_text()
    assert "| counter" in table and "random_k" in table and "zero_shot" in table


def test_nothing_but_new_modules_and_registry_lines_changed(tree):
    tree, _ = tree
    changed = [name for name in tracked_files() if not filecmp.cmp(REPO / name, tree / name, shallow=False)]
    assert set(changed) <= {"amd/registry.py", "config/config.yaml"}
    registry = (tree / "amd/registry.py").read_text()
    assert registry.startswith((REPO / "amd/registry.py").read_text())  # only appended to
    assert all((tree / name).exists() for name in NEW_MODULES)
