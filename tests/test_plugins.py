"""Plug-in points: a toy benchmark and a toy memory method with options and a table of its own live entirely outside
amd's tree, in a distribution installed (offline, with pip) into a folder of its own that declares them as entry
points (tests/plugins/pyproject.toml). They run through `amd run` and through the Snakemake workflow for real (a
scripted model server plays the student), the config schema checks their options, and nothing in the tree changes.
"""

import csv
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
MODULES = ("counter.py", "random_k.py", "random_k_spec.py")
NOTE = "random_note"
HEADING = "What other tasks did:"


def tree_state() -> str:
    """The checkout's tracked files as they are now (staged and unstaged changes included)."""
    return subprocess.run(["git", "diff", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def plugin(tmp_path_factory):
    """The plug-in distribution built from a copy of tests/plugins and installed into its own folder; an `amd` on
    PATH that sees it there; a work folder outside the tree. Yields (work folder, env, the tree as it was)."""
    before = tree_state()
    root = tmp_path_factory.mktemp("plugin")
    source = root / "source"
    (source / "amd_toy").mkdir(parents=True)
    shutil.copy(PLUGINS / "pyproject.toml", source)
    (source / "amd_toy" / "__init__.py").write_text('"""Toy plug-ins for amd (tests/test_plugins.py)."""\n')
    for name in MODULES:
        shutil.copy(PLUGINS / name, source / "amd_toy" / name)
    site = root / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "--no-build-isolation",
                    "--quiet", "--target", str(site), str(source)], check=True, capture_output=True, timeout=300)
    bin_dir = root / "bin"
    bin_dir.mkdir()
    (bin_dir / "amd").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m amd.cli "$@"\n')
    (bin_dir / "amd").chmod(0o755)
    env = os.environ | {"PYTHONPATH": str(site), "AMD_CACHE_DIR": str(root / "cache"),
                        "PATH": f"{bin_dir}:{Path(sys.executable).parent}:{os.environ['PATH']}"}
    work = root / "work"
    work.mkdir()
    return work, env, before


def counting_student(request):
    """Calls add(n=1) once per user turn, then closes the turn."""
    last = request["messages"][-1]
    if last["role"] == "user" and last["content"].startswith(OBSERVATION_PREFIX):
        return "Done."
    return '{"name": "add", "arguments": {"n": 1}}'


def amd(work, env, *argv, ok=True):
    done = subprocess.run(["amd", *argv], check=False, cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert (done.returncode == 0) == ok, done.stderr[-3000:]
    return done


def read_jsonl(path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def assert_notes_from_other_groups(records, k):
    for record in records:
        notes = record["system_memory"]
        assert len(notes) == k and all(note["type"] == NOTE for note in notes), record["task_id"]
        groups = {note["source_task_id"].rsplit("_", 1)[0] for note in notes}
        assert record["task_group"] not in groups, record["task_id"]  # never a variant of its own scenario
        assert record["task_group"] not in {note["source_group"] for note in notes}  # and the record says so


def test_the_plugins_come_from_their_installed_distribution_only(plugin):
    work, env, _ = plugin
    where = subprocess.run([sys.executable, "-c", "import amd_toy, amd; print(amd_toy.__file__); print(amd.__file__)"],
                           cwd=work, env=env, capture_output=True, text=True, check=True).stdout.split()
    assert not Path(where[0]).is_relative_to(REPO) and Path(where[1]).is_relative_to(REPO)
    help_text = " ".join(amd(work, env, "run", "--help").stdout.split())
    assert "random_k" in help_text and "--shout" in help_text and "random_k: heading, shout" in help_text


def test_a_toy_benchmark_and_memory_method_run_through_amd_run(plugin):
    work, env, _ = plugin
    amd(work, env, "run", "counter", "--agent", "oracle", "--out", "teacher.jsonl", "--no-progress")
    built = amd(work, env, "memory", "build", "--method", "random_k", "--trajectories", "teacher.jsonl",
                "--embedder", "hash:32", "--out", "bank")
    assert '"random_note": 6' in built.stdout
    assert json.loads((work / "bank/manifest.json").read_text())["method"] == {"name": "random_k", "version": "1"}
    refused = amd(work, env, "memory", "build", "--method", "random_k", "--trajectories", "teacher.jsonl",
                  "--embedder", "hash:32", "--option", "colour=red", "--out", "bank2", ok=False)
    assert "memory method random_k has no build option ['colour']; options: failures" in refused.stderr
    with ScriptedServer(counting_student) as server:
        student = ["run", "counter", "--agent", f"vllm:student@{server.url}", "--memory", "bank", "--memory-config",
                   "random_k", "--k", "rk=2", "--no-progress"]
        amd(work, env, *student, "--memory-option", f"heading={HEADING}", "--shout", "--out", "student.jsonl")
        prompts = [request.body["messages"][0]["content"] for request in server.chat_requests()]
        refused = amd(work, env, *student, "--memory-option", "volume=11", "--out", "other.jsonl", ok=False)
    assert "memory method random_k has no run option ['volume']; options: heading, shout" in refused.stderr
    records = read_jsonl(work / "student.jsonl")
    assert len(records) == 6 and all(record["success"] for record in records)
    assert all(record["memory"]["method"] == "random_k" and record["memory"]["k"] == {NOTE: 2} for record in records)
    assert all(record["memory"]["heading"] == HEADING.upper() for record in records)
    assert_notes_from_other_groups(records, k=2)
    assert prompts and all(HEADING.upper() in prompt for prompt in prompts)


def toy_config(student_url: str, memory_options: dict) -> dict:
    return {
        "benchmarks": {"counter": {"teacher_tasks": None, "student_tasks": None}},
        "run": {"max_steps_per_turn": 4, "max_steps": 12, "temperature": 0.0, "max_tokens": 64, "concurrency": 2},
        "teachers": {"oracle": {"spec": "oracle"}},
        "writers": {"rules": {"spec": "rules"}},
        "embedders": {"hashed": {"spec": "hash:32"}},
        "students": {"scripted": {"spec": f"vllm:student@{student_url}"}},
        "defaults": {"teacher": "oracle", "writer": "rules", "embedder": "hashed", "protocol": "self_excluded",
                     "k": {"rk": 3}, "delta": {}, "split_seed": 0, "seeds": [0],
                     "memory_options": {"random_k": memory_options}},
        "experiments": {"toy": {"benchmarks": ["counter"], "students": ["scripted"],
                                "memory_configs": ["zero_shot", "random_k"],
                                "outputs": ["table2_ablation", "table1_main", "random_notes"]}},
        "note": "toy plug-ins",
    }


def snakemake(work, env, *argv):
    return subprocess.run([str(Path(sys.executable).parent / "snakemake"), "--snakefile", str(REPO / "Snakefile"),
                           "--directory", str(work), *argv], check=False, cwd=work, env=env, capture_output=True,
                          text=True, timeout=600)


def test_the_config_schema_checks_the_plugins_options(plugin):
    work, env, _ = plugin
    (work / "config").mkdir(exist_ok=True)
    for options, key in (({"heading": 3}, "defaults.memory_options.random_k.heading"),
                         ({"volume": 11}, "defaults.memory_options.random_k")):
        (work / "config/config.yaml").write_text(yaml.safe_dump(toy_config("http://127.0.0.1:9/v1", options)))
        done = snakemake(work, env, "-n", "all")
        assert done.returncode != 0 and f"config: {key}:" in done.stdout + done.stderr, options


def test_the_toy_plugins_run_through_the_snakemake_workflow(plugin):
    work, env, _ = plugin
    (work / "config").mkdir(exist_ok=True)
    with ScriptedServer(counting_student) as server:
        config = toy_config(server.url, {"heading": HEADING})
        (work / "config/config.yaml").write_text(yaml.safe_dump(config))
        done = snakemake(work, env, "--cores", "2", "all")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # a method without settings has none in its paths
    memory_run = work / "results/counter/student-scripted/oracle-rules-hashed/random_k/self_excluded/k_rk3/seed0"
    assert (work / "results/counter/bank/random_k/oracle-rules-hashed/manifest.json").exists()
    records = read_jsonl(memory_run / "trajectories.jsonl")
    assert_notes_from_other_groups(records, k=3)
    assert all(record["memory"]["heading"] == HEADING for record in records)
    table2 = (work / "results/tables/table2_ablation.md").read_text()
    assert "| counter" in table2 and "random_k" in table2 and "zero_shot" in table2
    table1 = (work / "results/tables/table1_main.md").read_text()
    assert "zero_shot" in table1 and "random_k" not in table1  # its spec keeps it out of Table 1
    assert read_csv_rows(work / "results/tables/random_notes.csv") == [{"benchmark": "counter", "student": "scripted", "k": "rk=3", "notes_per_task": "3.0",
                      "success": "100.0"}]
    assert (work / "results/tables/random_notes.md").read_text().startswith(
        "**Random notes: per random_k run, the notes each task saw and the share of tasks solved.**")


def read_csv_rows(path) -> list[dict]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def test_nothing_in_the_tree_changed(plugin):
    _, _, before = plugin
    assert tree_state() == before
    assert not (REPO / "amd" / "benchmarks" / "counter.py").exists() and not (REPO / "results" / "counter").exists()
