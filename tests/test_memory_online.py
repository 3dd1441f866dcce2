"""Online memory (amd run --online): the bank grows with the student's own successes during a run and is used by
later tasks, never by the task's own group; entries retrieved by failing tasks lose rank; the frozen bank is never
changed; a killed run resumes to the same online state. End to end through the CLI on real BFCL tasks, with a
scripted student (test double) that makes one refused call per task, then replays the ground truth — except on
FAILING, where it answers without a call and fails.
"""

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from plugins.counter import CounterBenchmark
from replay_model import OBSERVATION_PREFIX, ground_truth_answers
from scripted_server import ScriptedServer
from test_memory_fixtures import all_records, write_jsonl

from amd.agent.agents import OracleAgent
from amd.agent.hooks import Injection, TaskContext
from amd.agent.runner import RunSpec, run_tasks
from amd.core.errors import AmdError
from amd.core.schema import read_trajectories
from amd.memory.bank import load_bank
from amd.memory.build import build_bank
from amd.memory.embed import get_embedder
from amd.memory.method import open_memory
from amd.memory.online import OnlineBank, redundant

TEACHER_TASKS = "multi_turn_base_0,multi_turn_base_1,multi_turn_base_2"
FAILING = "multi_turn_base_50"
# 40 and 43 open with the same user turn: one task group
TASKS = ["multi_turn_base_40", "multi_turn_base_43", FAILING, "multi_turn_base_48"]  # 48 also starts with `ls`
RETRIEVE_ALL = ["--k", "wf=20,st=20,fn=20", "--delta", "wf=-1,st=-1"]
INSIGHT = "Call {function} first and check its result before the next call; an error means reading the state again."


def amd(*argv, env, check=True):
    done = subprocess.run([sys.executable, "-m", "amd.cli", *argv], env=env, capture_output=True, text=True,
                          timeout=600, check=False)
    if check:
        assert done.returncode == 0, done.stderr[-3000:]
    return done


def student(answers: dict):
    """The scripted student; it also answers the memory writer's prompts (online_writer=student or a model).
    `answers` also maps FAILING to its instruction."""

    def respond(request):
        messages = request["messages"]
        prompt = messages[-1]["content"]
        if prompt.startswith("You are distilling reusable know-how"):
            function = re.search(r"\(app\.function_name\):\n([\w.]+)", prompt).group(1)
            return INSIGHT.format(function=function)
        if prompt.startswith("You are splitting an agent's successful"):
            last = re.search(r"numbered 0 to (\d+)", prompt).group(1)
            return json.dumps([{"start_step": 0, "end_step": int(last), "label": "scripted segment",
                                "description": "The scripted writer's one segment."}])
        if "JSON array of strings" in prompt:  # the student decomposes the instruction
            return '["check current state", "perform requested change"]'
        first_user = next(m["content"] for m in messages if m["role"] == "user")
        turn_text = next(m["content"] for m in reversed(messages)
                         if m["role"] == "user" and not m["content"].startswith(OBSERVATION_PREFIX))
        if first_user == answers[FAILING]:
            return "I cannot do that."
        replay = answers[(first_user, turn_text)]
        if prompt.startswith(OBSERVATION_PREFIX):
            return replay if "rejected call" in prompt else "Done."  # after the refused call: the real ones
        if len(messages) == 2 and replay.startswith("["):  # the task's first step: one refused call first
            return f"{replay[1:].split('(')[0]}(no_such_argument=1)"
        return replay

    return respond


@pytest.fixture(scope="module")
def answers():
    from amd.benchmarks.base import create_benchmark

    return ground_truth_answers(TASKS) | {FAILING: create_benchmark("bfcl").start(FAILING).instruction}


@pytest.fixture(scope="module")
def bank(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bank")
    env = {**os.environ, "AMD_CACHE_DIR": str(tmp / "cache")}
    amd("run", "bfcl", "--agent", "oracle", "--tasks", TEACHER_TASKS, "--out", str(tmp / "oracle.jsonl"),
        "--no-progress", env=env)
    amd("memory", "build", "--trajectories", str(tmp / "oracle.jsonl"), "--writer", "rules", "--embedder",
        "hash:256", "--out", str(tmp / "bank"), env=env)
    return tmp / "bank"


def online_run(server, bank, out, env, *extra, check=True):
    return amd("run", "bfcl", "--agent", f"vllm:student@{server.url}", "--tasks", ",".join(TASKS), "--out",
               str(out), "--memory", str(bank), "--memory-config", "wf_st_fn", "--online", *RETRIEVE_ALL,
               "--max-retries", "1", "--no-progress", *extra, env=env, check=check)


@pytest.fixture(scope="module")
def server(answers):
    """One student server for the module: a resumed run must reach the same agent spec (its URL) as before."""
    with ScriptedServer(student(answers)) as running:
        yield running


@pytest.fixture(scope="module")
def full_run(bank, server, tmp_path_factory):
    """One uninterrupted online run (asked for 3 tasks at once), and the bank's files before it."""
    tmp = tmp_path_factory.mktemp("online")
    env = {**os.environ, "AMD_CACHE_DIR": str(tmp / "cache")}
    before = bank_digest(bank)
    done = online_run(server, bank, tmp / "run.jsonl", env, "--concurrency", "3")
    return {"out": tmp / "run.jsonl", "stderr": done.stderr, "bank_before": before}


def bank_digest(bank) -> dict:
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in sorted(bank.iterdir())}


def records_of(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def history_of(out) -> list[dict]:
    return [json.loads(line) for line in (out.parent / f"{out.name}.online.jsonl").read_text().splitlines()]


def injections(record) -> list[dict]:
    return record["system_memory"] + [entry for turn in record["turns"] for entry in turn["injected_memory"]] + [
        entry for turn in record["turns"] for step in turn["steps"] for entry in step["injected_memory"]]


def test_the_bank_grows_with_successes_and_a_later_task_uses_what_an_earlier_one_added(full_run, bank):
    records, (header, *events) = records_of(full_run["out"]), history_of(full_run["out"])
    assert [r["task_id"] for r in records] == [e["task_id"] for e in events] == TASKS
    assert header["memory"] == records[0]["memory"] and records[0]["memory"]["online"]["writer"] == "rules"
    assert "one at a time, in task order (--concurrency 3 not used)" in full_run["stderr"]
    assert [e["success"] for e in events] == [True, True, False, True]
    first = events[0]["added"]
    assert {e["type"] for e in first} == {"workflow", "subtask", "function"}
    assert all(e["id"].startswith("online:") and e["source_group"] == "multi_turn_base_40" for e in first)
    sizes = [sum(e["bank_size"].values()) for e in events]
    assert sizes[0] < sizes[1] == sizes[2] < sizes[3]  # the failing task adds nothing
    # 43 is 40's variant: it sees nothing of their group, and its workflow (the same instruction) is a duplicate
    assert not {i["source_task_id"] for i in injections(records[1])} & {"multi_turn_base_40", "multi_turn_base_43"}
    (duplicate,) = [d for d in events[1]["dedup"] if d["entry_id"] == "online:workflow:multi_turn_base_43:0"]
    assert duplicate["dropped"] and duplicate["near"][0]["entry_id"] == "online:workflow:multi_turn_base_40:0"
    assert duplicate["near"][0]["similarity"] == pytest.approx(1.0)
    # the last task retrieves 40's workflow, subtasks and function examples, marked as online
    used = [i for i in injections(records[3]) if i["online"]]
    assert {i["type"] for i in used} == {"workflow", "subtask", "function"}
    assert {i["source_task_id"] for i in used} >= {"multi_turn_base_40"}
    assert not any(i["online"] for r in records[:2] for i in injections(r))  # nothing online existed for them
    assert all("online" in i for r in records for i in injections(r))
    assert bank_digest(bank) == full_run["bank_before"]  # the frozen bank on disk is never modified


def test_entries_retrieved_by_a_failing_task_lose_rank(full_run):
    """Rank lost = decay (0.05) x max(0, failed - succeeded): 40's entries, retrieved first by the failing task,
    rank lower when the last task retrieves them; the teacher's, which two successes retrieved before, do not."""
    records, (_, *events) = records_of(full_run["out"]), history_of(full_run["out"])
    failed = events[2]
    assert failed["added"] == [] and failed["retrieved"]
    ranks = {rank["entry_id"]: rank for rank in failed["rank"]}
    assert all(rank["failed"] == 1 for rank in ranks.values())
    lowered = {entry_id for entry_id, rank in ranks.items() if rank["penalty"] == pytest.approx(0.05)}
    assert lowered and all(entry_id.startswith("online:") and ranks[entry_id]["succeeded"] == 0 for entry_id in lowered)
    assert all(rank["penalty"] == 0 for entry_id, rank in ranks.items() if entry_id not in lowered)
    later = [i for i in injections(records[3]) if i["entry_id"] in ranks]
    assert {i["entry_id"] for i in later if i.get("rank_penalty") == pytest.approx(0.05)} == lowered & {
        i["entry_id"] for i in later}
    assert not any("rank_penalty" in i for r in records[:3] for i in injections(r))  # nothing had failed before


def test_a_run_killed_between_its_two_writes_or_mid_line_resumes_to_the_same_state(full_run, bank, server, tmp_path):
    """The states a kill can leave: a task's history event written but not its record (the history is written
    first), half an event line, and a run whose output Snakemake removed after a failed job."""
    expected_history = (full_run["out"].parent / "run.jsonl.online.jsonl").read_text()
    expected = [(r["task_id"], r["success"], injections(r)) for r in records_of(full_run["out"])]
    lines = expected_history.splitlines(keepends=True)
    records = full_run["out"].read_text().splitlines(keepends=True)
    states = {"event_before_record": (records[:2], lines[:4]),
              "half_an_event": (records[:2], lines[:3] + [lines[3][: len(lines[3]) // 2]]),
              "output_removed": ([], lines)}
    env = {**os.environ, "AMD_CACHE_DIR": str(tmp_path / "cache")}
    for name, (kept_records, kept_history) in states.items():
        out = tmp_path / name / "run.jsonl"
        out.parent.mkdir()
        if kept_records:
            out.write_text("".join(kept_records))
        (out.parent / "run.jsonl.online.jsonl").write_text("".join(kept_history))
        done = online_run(server, bank, out, env)
        assert f"{4 - len(kept_records)} tasks run, {len(kept_records)} already done" in done.stderr, name
        assert (out.parent / "run.jsonl.online.jsonl").read_text() == expected_history, name
        assert [(r["task_id"], r["success"], injections(r)) for r in records_of(out)] == expected, name


def test_a_run_killed_with_sigkill_resumes_to_the_same_online_state(full_run, bank, server, tmp_path):
    env = {**os.environ, "AMD_CACHE_DIR": str(tmp_path / "cache")}
    out = tmp_path / "run.jsonl"
    history = tmp_path / "run.jsonl.online.jsonl"
    argv = [sys.executable, "-m", "amd.cli", "run", "bfcl", "--agent", f"vllm:student@{server.url}", "--tasks",
            ",".join(TASKS), "--out", str(out), "--memory", str(bank), "--memory-config", "wf_st_fn", "--online",
            *RETRIEVE_ALL, "--max-retries", "1", "--no-progress"]
    server.latency_s = 0.2
    try:
        process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 300
        while not (history.exists() and len(history.read_text().splitlines()) >= 3):  # two tasks learnt
            assert process.poll() is None and time.monotonic() < deadline, "the run ended before it was killed"
            time.sleep(0.05)
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    finally:
        server.latency_s = 0.0
    assert len(records_of(out)) < len(TASKS)
    online_run(server, bank, out, env)
    assert history.read_text() == (full_run["out"].parent / "run.jsonl.online.jsonl").read_text()
    assert [injections(r) for r in records_of(out)] == [injections(r) for r in records_of(full_run["out"])]


def test_a_resumed_online_run_must_keep_its_task_order_and_history(full_run, bank, server, tmp_path):
    env = {**os.environ, "AMD_CACHE_DIR": str(tmp_path / "cache")}
    shutil.copy(full_run["out"], tmp_path / "run.jsonl")
    reordered = amd("run", "bfcl", "--agent", f"vllm:student@{server.url}", "--tasks",
                    ",".join([TASKS[1], TASKS[0], *TASKS[2:]]), "--out", str(tmp_path / "run.jsonl"), "--memory",
                    str(bank), "--memory-config", "wf_st_fn", "--online", *RETRIEVE_ALL, "--max-retries", "1",
                    "--no-progress", env=env, check=False)
    missing = online_run(server, bank, tmp_path / "run.jsonl", env, check=False)
    header, *events = (full_run["out"].parent / "run.jsonl.online.jsonl").read_text().splitlines()
    other = json.loads(header)
    other["memory"]["online"]["decay"] = 0.5
    (tmp_path / "run.jsonl.online.jsonl").write_text("\n".join([json.dumps(other), *events]) + "\n")
    another = online_run(server, bank, tmp_path / "run.jsonl", env, check=False)
    assert reordered.returncode == 2 and "resumes only in task order" in reordered.stderr
    assert missing.returncode == 2 and "run.jsonl.online.jsonl: missing" in missing.stderr
    assert another.returncode == 2 and "online history of another memory setting" in another.stderr


@pytest.mark.parametrize("writer", ["student", "model"])
def test_the_student_or_a_model_writer_distils_the_student_successes(bank, answers, tmp_path, writer):
    env = {**os.environ, "AMD_CACHE_DIR": str(tmp_path / "cache")}
    out = tmp_path / "run.jsonl"
    with ScriptedServer(student(answers)) as server:
        spec = "student" if writer == "student" else f"vllm:writer@{server.url}"
        online_run(server, bank, out, env, "--memory-option", f"online_writer={spec}")
        writer_models = {r.body["model"] for r in server.requests
                         if r.body and r.body["messages"][-1]["content"].startswith("You are distilling")}
    assert writer_models == {"student" if writer == "student" else "writer"}
    (_, first, *_) = history_of(out)
    (workflow,) = [e for e in first["added"] if e["type"] == "workflow"]
    assert workflow["insight"].startswith("Call ") and workflow["insight"].endswith("reading the state again.")
    assert {e["label"] for e in first["added"] if e["type"] == "subtask"} == {"scripted segment"}
    assert first["writer"]["calls"] == 2 and first["writer"]["prompt_tokens"] > 0
    assert records_of(out)[0]["memory"]["online"]["writer"] == spec


# ---- the store, without a run ------------------------------------------------------------------------------------

@pytest.fixture
def fixture_bank(tmp_path):
    build_bank([write_jsonl(tmp_path / "t.jsonl", all_records())], "amd", "rules", "hash:256", tmp_path / "bank")
    return tmp_path / "bank"


def test_before_anything_is_learnt_online_retrieval_is_the_frozen_retrieval(fixture_bank):
    frozen = open_memory(fixture_bank, "wf_st_fn", k=3, delta=-1.0)
    online = open_memory(fixture_bank, "wf_st_fn_online", k=3, delta=-1.0)
    assert online.one_task_at_a_time and not frozen.one_task_at_a_time
    for rec in all_records():
        me = TaskContext(rec["task_id"], rec["task_id"], rec["instruction"])
        names = [c["name"] for t in rec["turns"] for s in t["steps"] for c in s["calls"]] + ["add", "send_message"]
        for hook, argv in (("task_start", (me,)), ("after_error", (me, names))):
            want, got = getattr(frozen, hook)(*argv), getattr(online, hook)(*argv)
            assert got.text == want.text
            assert [{k: v for k, v in r.items() if k != "online"} for r in got.records] == want.records
            assert not any(r["online"] for r in got.records)


def test_decay_lowers_an_entry_that_keeps_failing_and_successes_restore_it(fixture_bank):
    frozen = load_bank(fixture_bank)
    bank = OnlineBank(frozen, decay=0.1, lookup_key=lambda type_name, entry: None)
    query = get_embedder("hash:256").embed_one(frozen.entries["workflow"][0]["query"])
    (best, cosine), (second, runner_up) = bank.search("workflow", query, 2, None)
    assert cosine == pytest.approx(1.0) and runner_up < 1.0
    failures = int(np.floor((cosine - runner_up) / 0.1)) + 1  # enough to rank below the runner-up
    for _ in range(failures):
        bank.record_outcome([best["id"]], success=False)
    assert bank.search("workflow", query, 1, None)[0][0]["id"] == second["id"]
    assert bank.search("workflow", query, 2, None)[1] == (best, pytest.approx(cosine))  # its cosine is kept
    assert best["id"] not in {e["id"] for e, _ in bank.search("workflow", query, 9, delta=cosine - 0.05)}
    for _ in range(failures):
        bank.record_outcome([best["id"]], success=True)
    assert bank.search("workflow", query, 1, None)[0][0]["id"] == best["id"] and bank.penalty(best["id"]) == 0
    assert frozen.search("workflow", query, 1, None)[0][0]["id"] == best["id"]  # the frozen bank never changed


@pytest.mark.parametrize("group,duplicates,shared,dropped", [
    ("g1", [], False, False),            # nothing similar: kept
    ("g1", ["g1"], False, True),         # a near-duplicate of its own group: the same tasks see both
    ("g1", ["g2"], False, False),        # g2's tasks could not see g2's copy, but can see this one: kept
    ("g1", ["g2", "g3"], False, True),   # every task sees one of the two
    ("g1", ["g2"], True, True),          # shared: every task sees every entry
])
def test_dedup_drops_an_entry_only_where_every_task_that_could_see_it_sees_a_near_duplicate(group, duplicates,
                                                                                            shared, dropped):
    assert redundant(group, duplicates, shared) is dropped


def test_online_options_are_checked(fixture_bank):
    with pytest.raises(AmdError, match="online_decay must be a number from 0.0 to 1.0"):
        open_memory(fixture_bank, "wf_st_fn_online", options={"online_decay": "fast"})
    with pytest.raises(AmdError, match="online_dedup need online=true"):
        open_memory(fixture_bank, "wf_st_fn", options={"online_dedup": "0.9"})
    assert open_memory(fixture_bank, "wf_st_fn", options={"online": "yes"}).describe()["online"] == {
        "writer": "rules", "dedup": 0.95, "decay": 0.05}


# ---- the runner, for any memory that changes as tasks finish ------------------------------------------------------

class LearnsInOrder:
    """A memory double that changes as tasks finish: it records the order of its hooks."""

    one_task_at_a_time = True

    def __init__(self):
        self.events = []

    def describe(self):
        return {"config": "wf_st_fn", "bank": "fixture"}

    def run_start(self, run):
        self.events.append(("start", [r["task_id"] for r in run.finished]))

    def task_start(self, task):
        self.events.append(("task", task.task_id))
        return Injection()

    def user_turn(self, task, message):
        return Injection()

    def after_error(self, task, failing_functions):
        return Injection()

    def episode_end(self, task, record):
        self.events.append(("learn", task.task_id))

    def run_end(self):
        self.events.append(("end", None))


def test_an_online_run_runs_one_task_at_a_time_and_stops_at_a_crash_so_a_rerun_resumes_in_order(tmp_path):
    benchmark, out = CounterBenchmark(), tmp_path / "run.jsonl"
    ids = benchmark.task_ids()

    def spec(memory, crash_on=None):
        def make_agent(episode):
            if episode.task_id == crash_on:
                raise RuntimeError("boom")
            return OracleAgent(episode.reference_turns())

        return RunSpec(benchmark=benchmark, agent_info={"spec": "oracle", "kind": "oracle", "model": None,
                                                        "params": {}},
                       make_agent=make_agent, memory=memory, memory_info=memory.describe())

    first = LearnsInOrder()
    summary = run_tasks(spec(first, crash_on=ids[2]), ids, out, concurrency=4, progress=False)
    assert summary.crashed == [ids[2]] and [r["task_id"] for r in read_trajectories(out)] == ids[:2]
    assert first.events == [("start", []), ("task", ids[0]), ("learn", ids[0]), ("task", ids[1]), ("learn", ids[1]),
                            ("end", None)]  # one at a time; nothing after the crash
    second = LearnsInOrder()
    run_tasks(spec(second), ids, out, concurrency=4, progress=False)
    assert second.events[0] == ("start", ids[:2]) and second.events[-1] == ("end", None)
    assert [name for kind, name in second.events if kind == "learn"] == ids[2:]
    assert [r["task_id"] for r in read_trajectories(out)] == ids
