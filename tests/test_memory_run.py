"""Memory end to end through the CLI: oracle teacher → rules bank → student run with wf_st_fn, on real BFCL tasks.

The student is a scripted model (test double) that first makes one bad call per task (an unknown keyword, so the
environment refuses it and reactive function memory fires) and then replays the ground truth.
"""

import json
import os
import shutil
import subprocess
import sys

import pytest
from replay_model import OBSERVATION_PREFIX, ground_truth_answers
from scripted_server import ScriptedServer

TASKS = [f"multi_turn_base_{i}" for i in range(0, 200, 10)]


def amd(*argv, env):
    done = subprocess.run([sys.executable, "-m", "amd.cli", *argv], env=env, capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def student_model(answers: dict):
    def respond(request):
        messages = request["messages"]
        if "JSON array of strings" in messages[-1]["content"]:  # the student decomposes the instruction
            return '["check current state", "perform requested change"]'
        first_user = next(m["content"] for m in messages if m["role"] == "user")
        turn_text = next(m["content"] for m in reversed(messages)
                         if m["role"] == "user" and not m["content"].startswith(OBSERVATION_PREFIX))
        replay = answers[(first_user, turn_text)]
        if messages[-1]["content"].startswith(OBSERVATION_PREFIX):
            return "Done."
        if len(messages) == 2 and replay.startswith("["):  # the task's first step: one refused call first
            function = replay[1:].split("(")[0]
            return f"{function}(no_such_argument=1)"
        return replay

    return respond


@pytest.fixture(scope="module")
def bank(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bank")
    env = {**os.environ, "AMD_CACHE_DIR": str(tmp / "cache")}
    amd("run", "bfcl", "--agent", "oracle", "--out", str(tmp / "oracle.jsonl"), "--no-progress", env=env)
    amd("memory", "build", "--trajectories", str(tmp / "oracle.jsonl"), "--writer", "rules", "--embedder",
        "hash:256", "--out", str(tmp / "bank"), env=env)
    return tmp / "bank"


EXCLUDED = {"self_excluded": "group", "self_excluded_task": "task", "shared": "none"}


@pytest.mark.parametrize("protocol", list(EXCLUDED))
def test_student_run_records_injections_and_never_sees_its_own_memory(bank, tmp_path, protocol):
    env = {**os.environ, "AMD_CACHE_DIR": str(tmp_path / "cache")}
    out = tmp_path / "student.jsonl"
    with ScriptedServer(student_model(ground_truth_answers(TASKS))) as server:
        amd("run", "bfcl", "--agent", f"vllm:student@{server.url}", "--tasks", ",".join(TASKS), "--out", str(out),
            "--memory", str(bank), "--memory-config", "wf_st_fn", "--protocol", protocol,
            "--delta", "wf=0,st=0", "--max-retries", "1", "--no-progress", env=env)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["task_id"] for r in records] == TASKS
    own_entries = 0
    for record in records:
        injections = record["system_memory"] + [entry for turn in record["turns"]
                                                for step in turn["steps"] for entry in step["injected_memory"]]
        types = {entry["type"] for entry in injections}
        assert {"workflow", "subtask", "function"} <= types, record["task_id"]
        own_entries += sum(entry["source_task_id"] == record["task_id"] for entry in injections)
        assert record["memory"]["config"] == "wf_st_fn" and record["memory"]["protocol"] == protocol
        # the leakage audit from the record alone: what was excluded, and each injection's source task and group
        assert record["memory"]["excluded"] == EXCLUDED[protocol]
        if protocol == "self_excluded":
            assert all(entry["source_group"] != record["task_group"] for entry in injections)
    if protocol != "shared":
        assert own_entries == 0
    else:
        assert own_entries > 0  # the leaky protocol really does leak: the check above can fail


def test_every_retrieval_query_is_recorded_and_score_reports_what_delta_left_without_memory(bank, tmp_path):
    """δ 0 for workflows, 0.99 for subtasks (no label comes that close): amd score shows the one never held back
    and the other always, with the similarities of what was injected."""
    env = {**os.environ, "AMD_CACHE_DIR": str(tmp_path / "cache")}
    out, tasks = tmp_path / "student.jsonl", TASKS[:4]
    with ScriptedServer(student_model(ground_truth_answers(tasks))) as server:
        amd("run", "bfcl", "--agent", f"vllm:student@{server.url}", "--tasks", ",".join(tasks), "--out", str(out),
            "--memory", str(bank), "--memory-config", "wf_st_fn", "--delta", "wf=0,st=0.99", "--max-retries", "1",
            "--no-progress", env=env)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    for record in records:
        by_type = {t: [q for q in record["memory_queries"] if q["type"] == t] for t in ("workflow", "subtask")}
        assert [(q["query"], q["found"]) for q in by_type["workflow"]] == [(record["instruction"], 1)]
        assert [q["query"] for q in by_type["subtask"]] == ["check current state", "perform requested change"]
        assert all(q["found"] == 0 and q["best"] < 0.99 for q in by_type["subtask"])  # how far below δ: recorded
        lookups = [q for q in record["memory_queries"] if q["type"] == "function"]  # by name, no δ
        refused = record["turns"][0]["steps"][0]["rejected"][0]["text"].split("(")[0]
        assert lookups[0]["query"] == refused and all(q["found"] == 1 for q in lookups)
    done = amd("score", str(out), "--json", str(tmp_path / "score.json"), env=env)
    assert "workflow: δ 0; 4 queries, 0 found no entry at or above δ (0.0 %); 4 injected" in done.stdout
    assert "subtask: δ 0.99; 8 queries, 8 found no entry at or above δ (100.0 %)" in done.stdout
    retrieval = json.loads((tmp_path / "score.json").read_text())[0]["retrieval"]
    assert (retrieval["subtask"]["no_entry_%"], retrieval["subtask"]["injected"]) == (100.0, 0)
    assert retrieval["workflow"]["injected_min"] > 0.4 and retrieval["function"]["delta"] is None


def test_a_corrupt_bank_file_is_one_line_naming_file_and_line(bank, tmp_path):
    """In a bank built before checksums (a bank that has them refuses the changed file first: test_reliability)."""
    broken = tmp_path / "bank"
    shutil.copytree(bank, broken)
    manifest = json.loads((broken / "manifest.json").read_text())
    del manifest["files"]
    (broken / "manifest.json").write_text(json.dumps(manifest))
    lines = (broken / "subtask.jsonl").read_text().splitlines()
    lines[2] = lines[2][: len(lines[2]) // 2]
    (broken / "subtask.jsonl").write_text("\n".join(lines) + "\n")
    done = subprocess.run([sys.executable, "-m", "amd.cli", "memory", "show", str(broken)], capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"{broken / 'subtask.jsonl'}:3: corrupt bank file" in done.stderr


def test_variants_of_one_scenario_see_each_other_only_under_the_task_level_protocol(bank):
    """BFCL tasks 40 and 43 open with the same user turn: one group, so neither retrieves the other's memory."""
    from amd.agent.hooks import TaskContext
    from amd.benchmarks.base import create_benchmark
    from amd.memory.method import open_memory

    benchmark = create_benchmark("bfcl")
    assert benchmark.task_group("multi_turn_base_43") == benchmark.task_group("multi_turn_base_40") == \
        "multi_turn_base_40"
    assert sum(benchmark.task_group(t) != t for t in benchmark.task_ids()) == 1
    episode = benchmark.start("multi_turn_base_43")
    task = TaskContext("multi_turn_base_43", "multi_turn_base_40", episode.instruction)
    leaky = open_memory(bank, "wf", protocol="shared", k=3, delta=-1.0).task_start(task).records
    assert {r["source_task_id"] for r in leaky[:2]} == {"multi_turn_base_40", "multi_turn_base_43"}  # identical
    safe = open_memory(bank, "wf_st_fn", k=20, delta=-1.0)
    records = safe.task_start(task).records + safe.after_error(task, ["cd", "ls", "mv"]).records
    assert records and not {r["source_task_id"] for r in records} & {"multi_turn_base_40", "multi_turn_base_43"}
    # the paper's unit (B.3): only the task itself is excluded, so its variant's memory comes first
    paper = open_memory(bank, "wf", protocol="self_excluded_task", k=3, delta=-1.0).task_start(task).records
    assert paper[0]["source_task_id"] == "multi_turn_base_40" and "multi_turn_base_43" not in \
        {r["source_task_id"] for r in paper}


def repeating_student(answers: dict):
    """Decomposes differently per seed (the single shot, seed 0, disagrees with the samples), then makes the same
    refused call twice per task before replaying the ground truth."""
    by_seed = {0: '["read the manual"]', 1000: '["check current state", "perform requested change"]',
               1001: '["check the current state", "perform change"]', 1002: '["perform requested change"]'}

    def respond(request):
        messages = request["messages"]
        if "JSON array of strings" in messages[-1]["content"]:
            return by_seed[request["seed"]]
        first_user = next(m["content"] for m in messages if m["role"] == "user")
        turn_text = next(m["content"] for m in reversed(messages)
                         if m["role"] == "user" and not m["content"].startswith(OBSERVATION_PREFIX))
        replay = answers[(first_user, turn_text)]
        refused = sum("no_such_argument" in (m["content"] or "") for m in messages if m["role"] == "assistant")
        if refused < 2 and replay.startswith("["):
            return f"{replay[1:].split('(')[0]}(no_such_argument=1)"
        return "Done." if messages[-1]["content"].startswith(OBSERVATION_PREFIX) else replay

    return respond


def test_gated_checked_run_records_the_decomposition_and_hints_only_a_repeated_error(bank, tmp_path):
    tasks = TASKS[:3]
    env = {**os.environ, "AMD_CACHE_DIR": str(tmp_path / "cache")}
    out = tmp_path / "student.jsonl"
    with ScriptedServer(repeating_student(ground_truth_answers(tasks))) as server:
        amd("run", "bfcl", "--agent", f"vllm:student@{server.url}", "--tasks", ",".join(tasks), "--out", str(out),
            "--memory", str(bank), "--memory-config", "wf_st_fn_gated", "--memory-option", "decompose_samples=3",
            "--delta", "wf=0,st=0", "--max-retries", "1", "--no-progress", env=env)
        seeds = sorted(r.body["seed"] for r in server.chat_requests()
                       if "JSON array of strings" in r.body["messages"][-1]["content"])
    assert seeds == sorted([0, 1000, 1001, 1002] * len(tasks))
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["task_id"] for r in records] == tasks
    for record in records:
        assert record["memory"]["fn_gate"] == "repeat" and record["memory"]["decompose_samples"] == 3
        decomposition = record["memory_details"]["decomposition"]
        assert decomposition["single_shot"] == ["read the manual"] and decomposition["differs"] is True
        assert decomposition["merged"] == ["check current state", "perform requested change"]
        assert {m["query"] for m in record["system_memory"] if m["type"] == "subtask"} <= set(decomposition["merged"])
        errors = [step for turn in record["turns"] for step in turn["steps"] if step["error"]]
        first, second = errors[:2]
        assert not first["injected_memory"] and first["memory_details"]["fn_gate"]["withheld"], record["task_id"]
        assert {m["type"] for m in second["injected_memory"]} == {"function"} and "memory_details" not in second
