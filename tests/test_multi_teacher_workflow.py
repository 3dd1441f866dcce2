"""Several teachers through the real workflow: two teachers on real BFCL tasks (the oracle, and a scripted model
that solves only half of them), each teacher's bank, two pooled banks (one preferring the scripted teacher), a
scripted student with each of the four, and table_multi_teacher, all made by `snakemake` calling the real `amd`."""

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from replay_model import ground_truth_answers, replay_model
from scripted_server import ScriptedServer

from amd.core.files import sha256_file

REPO = Path(__file__).resolve().parents[1]
WORKFLOW_FILES = ("Snakefile", "rules", "config", "report", "profiles", "environment.yml")
TEACHER_TASKS = [f"multi_turn_base_{i}" for i in (0, 10, 20, 30, 50, 60, 70, 80)]
SOLVED_BY_REPLAY = set(TEACHER_TASKS[:4])
STUDENT_TASKS = ["multi_turn_base_0", "multi_turn_base_50"]
BANK = "results/bfcl/bank/amd/{}-rules-hashed-amd"
RUN = "results/bfcl/student-scripted/{}-rules-hashed-amd/wf/self_excluded/k_wf7/seed0/trajectories.jsonl"


def two_models(answers: dict, solved_instructions: set):
    """The student replays the ground truth; the teacher `replay` only for the tasks of `solved_instructions`."""
    replay = replay_model(answers)

    def respond(request):
        first_user = next(m["content"] for m in request["messages"] if m["role"] == "user")
        if request["model"] == "replay" and first_user not in solved_instructions:
            return "Nothing to do."
        return replay(request)

    return respond


def config(url: str) -> dict:
    return {
        "benchmarks": {"bfcl": {"teacher_tasks": TEACHER_TASKS, "student_tasks": STUDENT_TASKS}},
        "run": {"max_steps_per_turn": 4, "max_steps": 40, "temperature": 0.0, "max_tokens": 256, "concurrency": 4},
        "teachers": {"oracle": {"spec": "oracle", "max_steps_per_turn": 20}, "replay": {"spec": f"vllm:replay@{url}"}},
        "teacher_pools": {"both": {"teachers": ["oracle", "replay"]},
                          "both_replay": {"teachers": ["oracle", "replay"], "prefer": "replay"}},
        "writers": {"rules": {"spec": "rules"}},
        "embedders": {"hashed": {"spec": "hash:64", "delta": {"wf": -1}}},
        "representations": {"amd": {"wf": "prose", "st": "code", "fn": "code"}},
        "students": {"scripted": {"spec": f"vllm:student@{url}"}},
        "defaults": {"teacher": "oracle", "writer": "rules", "embedder": "hashed", "representation": "amd",
                     "protocol": "self_excluded", "k": {"wf": 7}, "delta": {}, "split_seed": 0, "seeds": [0]},
        "experiments": {"multi": {"benchmarks": ["bfcl"], "students": ["scripted"], "memory_configs": ["wf"],
                                  "teachers": ["oracle", "replay", "both", "both_replay"],
                                  "outputs": ["table_multi_teacher"]}},
        "note": "two teachers on 8 BFCL tasks, a scripted student",
    }


def read_jsonl(path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def test_a_pooled_bank_keeps_provenance_through_the_real_workflow(tmp_path):
    for name in WORKFLOW_FILES:
        source = REPO / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, tmp_path / name)
    solved_instructions = {instruction for task, instruction in _instructions(TEACHER_TASKS).items()
                           if task in SOLVED_BY_REPLAY}
    env = os.environ | {"AMD_CACHE_DIR": str(tmp_path / "cache"),
                        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    with ScriptedServer(two_models(ground_truth_answers(TEACHER_TASKS), solved_instructions)) as server:
        (tmp_path / "config/config.yaml").write_text(yaml.safe_dump(config(server.url)))
        done = subprocess.run([str(Path(sys.executable).parent / "snakemake"), "--cores", "2", "all"], check=False,
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    teachers = {name: read_jsonl(tmp_path / f"results/bfcl/teacher-{name}/trajectories.jsonl")
                for name in ("oracle", "replay")}
    assert {r["task_id"] for r in teachers["oracle"] if r["success"]} == set(TEACHER_TASKS)
    assert {r["task_id"] for r in teachers["replay"] if r["success"]} == SOLVED_BY_REPLAY
    manifest = json.loads((tmp_path / BANK.format("both") / "manifest.json").read_text())
    assert [(s["teacher"], s["sha256"]) for s in manifest["sources"]] == [
        (name, sha256_file(tmp_path / f"results/bfcl/teacher-{name}/trajectories.jsonl")) for name in teachers]
    workflow = read_jsonl(tmp_path / BANK.format("both") / "workflow.jsonl")
    assert sorted((e["source_teacher"], e["source_task_id"]) for e in workflow) == sorted(
        [("oracle", t) for t in TEACHER_TASKS] + [("replay", t) for t in SOLVED_BY_REPLAY])

    expected = {"oracle": lambda task: None, "replay": lambda task: None, "both": lambda task: "oracle",
                "both_replay": lambda task: "replay" if task in SOLVED_BY_REPLAY else "oracle"}
    for bank, teacher_of in expected.items():
        records = read_jsonl(tmp_path / RUN.format(bank))
        assert [r["task_id"] for r in records] == STUDENT_TASKS and all(r["success"] for r in records)
        for record in records:
            injected = record["system_memory"]
            sources = {e["source_task_id"] for e in injected}
            solved = set(TEACHER_TASKS) if bank != "replay" else SOLVED_BY_REPLAY
            assert sources == solved - {record["task_id"]}, (bank, record["task_id"])  # never its own
            assert [e.get("source_teacher") for e in injected] == [teacher_of(e["source_task_id"]) for e in injected]
        pool = records[0]["memory"].get("pool")
        assert (pool is None) == (bank in teachers)
    assert records[0]["memory"]["pool"]["tasks_by_teacher"] == {"oracle": 4, "replay": 4}

    with open(tmp_path / "results/tables/table_multi_teacher.csv", newline="") as handle:
        rows = {(row["acting"], row["teacher"]): row for row in csv.DictReader(handle)}
    assert float(rows[("teacher itself", "replay")]["success"]) == 50.0
    assert rows[("scripted", "both_replay")]["prefer"] == "replay"
    assert rows[("scripted", "both_replay")]["memory_from"] == "oracle 4, replay 4"
    assert rows[("scripted", "both")]["pool"] == "oracle+replay" and rows[("scripted", "oracle")]["pool"] == "—"


def _instructions(task_ids) -> dict:
    from amd.benchmarks.base import create_benchmark

    benchmark = create_benchmark("bfcl")
    return {task: benchmark.start(task).instruction for task in task_ids}
