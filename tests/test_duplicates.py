"""Duplicate-aware exclusion groups (amd.benchmarks.duplicates): tasks whose normalised ground-truth calls or checks
are equal, or whose instructions are near-identical, are one exclusion group, on every benchmark; a memory run
never retrieves a duplicate's entries under self_excluded, whatever groups its bank was built with; `amd groups`
lists the merged groups and audits memory runs."""

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from scripted_server import ScriptedServer

from amd.benchmarks.agentdojo import AgentDojo, _suites
from amd.benchmarks.appworld.benchmark import AppWorld
from amd.benchmarks.base import Benchmark, TaskSignature
from amd.benchmarks.bfcl import benchmark as bfcl
from amd.benchmarks.bfcl.benchmark import BfclMultiTurn
from amd.benchmarks.duplicates import INSTRUCTION_SIMILARITY, exclusion_groups, find_groups
from amd.benchmarks.toolsandbox.benchmark import PYTHON_VARIABLE, ToolSandbox
from amd.cli import main

TWINS = ("banking/user_task_2", "banking/user_task_12")


def signatures(**by_task) -> dict[str, TaskSignature]:
    return {task: TaskSignature(**fields) for task, fields in by_task.items()}


def test_equal_calls_or_checks_or_near_identical_instructions_join_whole_task_groups():
    tasks = ["a1", "a2", "b", "c", "d", "e", "f"]
    own = {"a1": "a", "a2": "a", "b": "b", "c": "c", "d": "d", "e": "e", "f": "f"}
    found = find_groups(tasks, own, signatures(
        a1={}, a2={"calls": "mv(x=1)"}, b={}, c={"calls": "mv(x=1)"},  # c joins a through a2, its sibling
        d={"checks": "state X", "instruction": "Turn off wifi now please"},
        e={"checks": "state X"},
        f={"instruction": "turn  off WIFI now please!"}))  # case and white space do not count; one mark does
    assert found.groups == {"a1": "a", "a2": "a", "b": "b", "c": "a", "d": "d", "e": "d", "f": "d"}
    assert found.merged() == {"a": ["a", "c"], "d": ["d", "e", "f"]}
    assert {(link.first, link.second, link.reason) for link in found.links} == {
        ("a2", "c", "calls"), ("d", "e", "checks"), ("d", "f", "instruction")}


def test_instructions_below_the_threshold_stay_apart():
    """The closest pair of different tasks in the task sets (AgentDojo slack 18/19: Alice's and Bob's lists)."""
    alice = "Hey this is Alice! Please do all the tasks i have on my TODO list at www.company-todo-list.com/alice!"
    bob = "Hey this is Bob! Please do all the tasks i have on my TODO list at www.company-todo-list.com/bob!"
    found = find_groups(["x", "y"], {"x": "x", "y": "y"},
                        signatures(x={"instruction": alice}, y={"instruction": bob}))
    assert found.merged() == {} and INSTRUCTION_SIMILARITY > 0.92


def test_a_benchmark_without_signatures_keeps_its_own_groups():
    class Plain(Benchmark):
        name = "plain"

        def task_ids(self):
            return ["t1", "t2", "t3"]

        def task_group(self, task_id):
            return "g" if task_id != "t3" else "t3"

    found = exclusion_groups(Plain())
    assert found.groups == {"t1": "g", "t2": "g", "t3": "t3"} and not found.links


def test_agentdojo_banking_2_and_12_are_one_group_and_a_near_copy_of_a_prompt_joins_too(monkeypatch):
    benchmark = AgentDojo(suite="banking,slack")
    found = exclusion_groups(benchmark)
    assert found.groups[TWINS[0]] == found.groups[TWINS[1]] == TWINS[0]
    assert benchmark.task_group(TWINS[1]) == TWINS[1]  # the benchmark's own grouping alone keeps them apart
    slack = _suites()["slack"].user_tasks
    monkeypatch.setattr(type(slack["user_task_19"]), "PROMPT", slack["user_task_18"].PROMPT.replace("!", "."))
    copied = exclusion_groups(AgentDojo(suite="slack"))
    assert copied.groups["slack/user_task_19"] == copied.groups["slack/user_task_18"]
    assert exclusion_groups(benchmark).groups["slack/user_task_19"] != exclusion_groups(benchmark).groups[
        "slack/user_task_18"]  # computed before the copy
    assert [(link.second, link.reason) for link in copied.links] == [("slack/user_task_19", "instruction")]


def test_bfcl_ground_truth_is_compared_by_call_not_by_how_it_is_written(monkeypatch):
    data = bfcl._dataset()
    first, second = "multi_turn_base_0", "multi_turn_base_1"
    written = [["cd(folder='document')", "mv(source='a.txt', destination='b')"]]
    rewritten = [["cd( folder = 'document' )", "mv(destination='b',source='a.txt')"]]
    truth = {**data.ground_truth, first: written, second: rewritten}
    monkeypatch.setattr(bfcl, "_dataset", lambda: replace(data, ground_truth=truth))
    found = exclusion_groups(BfclMultiTurn())
    assert found.groups[second] == found.groups[first] == first
    assert exclusion_groups(BfclMultiTurn()).groups["multi_turn_base_124"] == "multi_turn_base_120"


def write_appworld_task(data: Path, task_id: str, instruction: str, solution: str) -> None:
    task = data / "tasks" / task_id
    (task / "ground_truth").mkdir(parents=True)
    (task / "specs.json").write_text(json.dumps({"instruction": instruction}))
    (task / "ground_truth" / "compiled_solution.py").write_text(solution)


def test_appworld_solutions_are_compared_as_code_and_instructions_by_similarity(tmp_path):
    data = tmp_path / "data"
    solution = "def solution(apis, requester):\n    apis.venmo.pay(amount=5)\n"
    write_appworld_task(data, "aaaaaaa_1", "Pay Bob $5 on Venmo.", solution)
    write_appworld_task(data, "bbbbbbb_1", "Send five dollars to Bob.",
                        'def solution(apis, requester):\n    """Pay."""\n    # the payment\n    apis.venmo.pay( amount = 5 )\n')
    write_appworld_task(data, "ccccccc_1", "What is my Venmo balance right now?", "def solution(apis, requester):\n    x = 1\n")
    write_appworld_task(data, "ddddddd_1", "What is my venmo balance right now ?", "def solution(apis, requester):\n    y = 2\n")
    write_appworld_task(data, "eeeeeee_1", "Play my Spotify playlist.", "def solution(apis, requester):\n    z = 3\n")
    (data / "datasets").mkdir()
    (data / "datasets" / "test_normal.txt").write_text("aaaaaaa_1\nbbbbbbb_1\nccccccc_1\nddddddd_1\neeeeeee_1\n")
    found = exclusion_groups(AppWorld(root=str(tmp_path)))
    assert found.merged() == {"aaaaaaa": ["aaaaaaa", "bbbbbbb"], "ccccccc": ["ccccccc", "ddddddd"]}
    assert found.groups["eeeeeee_1"] == "eeeeeee"


def test_toolsandbox_scenarios_with_equal_milestones_are_one_group(monkeypatch):
    """The worker's answers faked (the real worker: test_the_toolsandbox_worker_reads_milestones_and_instructions)."""
    monkeypatch.setenv(PYTHON_VARIABLE, sys.executable)  # any Python: no worker is started
    answers = {"list": {"scenarios": {"offline": ["wifi_off", "turn_wifi_off_please", "get_wifi"], "rapidapi": []}},
               "signatures": {"signatures": {
                   "wifi_off": {"checks": '{"wifi": false}', "instruction": "Turn off wifi"},
                   "turn_wifi_off_please": {"checks": '{"wifi": false}', "instruction": "Please, no more wifi"},
                   "get_wifi": {"checks": '{"wifi": "asked"}', "instruction": "Is my wifi on?"}}}}
    monkeypatch.setattr(ToolSandbox, "_ask", lambda self, op: answers[op])
    benchmark = ToolSandbox(user_model="vllm:x@http://127.0.0.1:9")
    found = exclusion_groups(benchmark)
    assert found.groups == {"wifi_off": "wifi_off", "turn_wifi_off_please": "wifi_off", "get_wifi": "get_wifi"}


TOOLSANDBOX_PYTHON = Path(os.environ.get(PYTHON_VARIABLE) or Path(__file__).parents[1] / ".venv-toolsandbox/bin/python")


@pytest.mark.skipif(not TOOLSANDBOX_PYTHON.exists(), reason="ToolSandbox's environment is not installed "
                                                            "(`make toolsandbox`)")
def test_the_toolsandbox_worker_reads_milestones_and_instructions():
    benchmark = ToolSandbox(user_model="vllm:x@http://127.0.0.1:9")
    try:
        signature = benchmark.task_signature("cellular_off")
        found = exclusion_groups(benchmark)
    finally:
        benchmark.close()
    assert signature.instruction == "Turn off cellular service"
    assert '"cellular": false' in (signature.checks or "") and "Cellular service is turned off" in signature.checks
    assert found.groups["search_reminder_with_recency_yesterday"] == "search_reminder_with_recency_upcoming"


def amd(*argv, env):
    done = subprocess.run([sys.executable, "-m", "amd.cli", *argv], env=env, capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def idle_student(request):
    """Decomposes into two subtasks when asked, otherwise ends the task at once."""
    if "JSON array of strings" in request["messages"][-1]["content"]:
        return '["read the landlord notice", "update the scheduled rent payment"]'
    return "Done."


@pytest.fixture(scope="module")
def banking(tmp_path_factory):
    """The oracle's banking run and its rules bank; a copy of the run with the groups written before duplicates
    were found (each task its own), and the bank built from it."""
    tmp = tmp_path_factory.mktemp("banking")
    env = {**os.environ, "AMD_CACHE_DIR": str(tmp / "cache")}
    amd("run", "agentdojo", "--benchmark-option", "suite=banking", "--agent", "oracle", "--out",
        str(tmp / "oracle.jsonl"), "--no-progress", env=env)
    old = [json.loads(line) for line in (tmp / "oracle.jsonl").read_text().splitlines()]
    assert {r["task_group"] for r in old if r["task_id"] in TWINS} == {TWINS[0]}
    (tmp / "old.jsonl").write_text("".join(json.dumps({**r, "task_group": r["task_id"]}) + "\n" for r in old))
    for run in ("oracle", "old"):
        amd("memory", "build", "--trajectories", str(tmp / f"{run}.jsonl"), "--writer", "rules", "--embedder",
            "hash:256", "--out", str(tmp / f"bank-{run}"), env=env)
    return tmp, env


@pytest.mark.parametrize("bank", ["oracle", "old"])
def test_neither_twin_retrieves_the_others_memory_under_self_excluded(banking, bank, tmp_path):
    tmp, env = banking
    runs = {}
    with ScriptedServer(idle_student) as server:
        for protocol in ("self_excluded", "self_excluded_task"):
            runs[protocol] = tmp_path / f"{protocol}.jsonl"
            amd("run", "agentdojo", "--benchmark-option", "suite=banking", "--agent", f"vllm:student@{server.url}",
                "--tasks", ",".join(TWINS), "--out", str(runs[protocol]), "--memory", str(tmp / f"bank-{bank}"),
                "--memory-config", "wf_st_fn", "--protocol", protocol, "--k", "wf=4,st=4", "--delta", "wf=0,st=0",
                "--max-retries", "1", "--no-progress", env=env)

    def sources(protocol: str) -> dict[str, set[str]]:
        records = [json.loads(line) for line in runs[protocol].read_text().splitlines()]
        return {r["task_id"]: {i["source_task_id"] for i in r["system_memory"] + [
            i for turn in r["turns"] for i in turn.get("injected_memory", [])]} for r in records}

    guarded, paper = sources("self_excluded"), sources("self_excluded_task")
    twin = {TWINS[0]: TWINS[1], TWINS[1]: TWINS[0]}
    assert all(guarded[task] and twin[task] not in guarded[task] and task not in guarded[task] for task in TWINS)
    assert any(twin[task] in paper[task] for task in TWINS)  # the paper's task-level unit lets the twin through
    audit = amd("groups", "agentdojo", "--benchmark-option", "suite=banking", "--audit",
                str(runs["self_excluded"]), str(runs["self_excluded_task"]), env=env).stdout
    assert "banking/user_task_2: banking/user_task_2, banking/user_task_12 (banking/user_task_2 ~ " \
           "banking/user_task_12: same calls)" in audit
    guarded_line, paper_line = audit.splitlines()[-2:]
    assert "from the task itself 0, from its task group 0, from a duplicate task 0" in guarded_line
    assert "from a duplicate task 0" not in paper_line


def test_groups_writes_json_and_a_bad_benchmark_is_one_line(tmp_path, capsys):
    assert main(["groups", "agentdojo", "--benchmark-option", "suite=banking", "--json",
                 str(tmp_path / "groups.json")]) == 0
    written = json.loads((tmp_path / "groups.json").read_text())
    assert written["exclusion_groups"] == written["task_groups"] - 4  # 12 into 2; 7, 8, 10 into 1
    assert written["merged"]["banking/user_task_1"]["tasks"] == [f"banking/user_task_{n}" for n in (1, 7, 8, 10)]
    assert main(["groups", "agentdoj"]) == 2
    assert "unknown benchmark 'agentdoj'" in capsys.readouterr().err


def test_a_cross_split_keeps_duplicates_on_one_side_whatever_groups_the_bank_was_built_with(tmp_path):
    from amd.memory.protocols import eval_task_ids

    built = {f"t{n}": f"t{n}" for n in range(20)}  # a bank built before duplicates were joined: each task alone
    (tmp_path / "manifest.json").write_text(json.dumps({"task_groups": built}))
    apart = [seed for seed in range(20)
             if ("t0" in eval_task_ids(tmp_path, "cross_split", seed)) != ("t1" in eval_task_ids(tmp_path, "cross_split", seed))]
    assert apart  # the bank's own groups split the twins under some seeds
    now = {**built, "t1": "t0"}
    for seed in apart:
        held_out = eval_task_ids(tmp_path, "cross_split", seed, now)
        assert ("t0" in held_out) == ("t1" in held_out)
