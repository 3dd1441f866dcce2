"""The paper-harness switches that need no benchmark engine: memory placement and per-turn replacement in the
system prompt (through `amd run bfcl` on a scripted server), function docs in hints, benchmark-specific prompts,
trimmed insights and longer observations in a bank, the first code block, history trimming, AppWorld's options."""

import itertools
import json
import shlex
from pathlib import Path

import pytest
import yaml
from scripted_server import ScriptedServer
from test_bfcl_agreement import TASKS, behaviour, policy
from test_memory_fixtures import all_records, write_jsonl
from test_workflow_args import Wildcards

from amd.agent.history import trimmed
from amd.agent.hooks import TaskContext
from amd.benchmarks.appworld.harness import PAPER, AppWorldHarness, cut_output, harness_from_options
from amd.benchmarks.base import create_benchmark
from amd.benchmarks.parsing import parse_first_code_block
from amd.cli import main
from amd.core.errors import AmdError
from amd.core.prompts import benchmark_prompt, load_prompt
from amd.llm.base import ChatReply
from amd.memory.build import build_bank
from amd.memory.method import open_memory
from amd.methods.amd.entries import BuildSettings, build_entries
from amd.workflow.config import active_config
from amd.workflow.grid import Grid

WORKFLOW_HEADING = load_prompt("memory_block_workflow").splitlines()[0]
SUBTASK_HEADING = load_prompt("memory_block_subtask").splitlines()[0]
SOLVED = [task for task in TASKS if behaviour(task) == "solve"]
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bfcl_bank(tmp_path_factory):
    where = tmp_path_factory.mktemp("paper-bank")
    assert main(["run", "bfcl", "--agent", "oracle", "--tasks", ",".join(TASKS), "--out", str(where / "o.jsonl"),
                 "--no-progress"]) == 0
    assert main(["memory", "build", "--trajectories", str(where / "o.jsonl"), "--writer", "rules", "--embedder",
                 "hash:256", "--out", str(where / "bank")]) == 0
    return where / "bank"


def without_memory(request: dict):
    """The agreement test's scripted model, reading each user message without the memory appended to it."""
    messages = [{**m, "content": m["content"].split("\n\n<retrieved-memory>")[0]} if m["role"] == "user" else m
                for m in request["messages"]]
    return policy({**request, "messages": messages})


def student_run(bank, out, *options):
    with ScriptedServer(without_memory) as server:
        assert main(["run", "bfcl", "--agent", f"vllm:scripted@{server.url}", "--prompting", "official",
                     "--benchmark-option", "harness=official", "--tasks", ",".join(SOLVED), "--out", str(out),
                     "--memory", str(bank), "--memory-config", "wf_st", "--protocol", "shared",
                     "--delta", "wf=-1,st=-1", "--no-progress", *options]) == 0
        bodies = [r.body for r in server.chat_requests()]
    return bodies, [json.loads(line) for line in out.read_text().splitlines()]


def test_turn_memory_system_replaces_the_turns_subtasks_in_the_system_message(bfcl_bank, tmp_path):
    bodies, records = student_run(bfcl_bank, tmp_path / "s.jsonl", "--memory-option", "per_turn=true",
                                  "--memory-option", "turn_memory=system")
    assert all(r["success"] for r in records) and records[0]["memory"]["turn_memory"] == "system"
    assert records[0]["step_caps"] == {"max_steps": None, "max_steps_per_turn": 20}  # the official loop: no task cap
    for record in records:
        subtasks = [[e["entry_id"] for e in turn["injected_memory"]] for turn in record["turns"]]
        assert all(subtasks) and len(set(map(tuple, subtasks))) > 1, record["task_id"]  # retrieved per turn
    by_turn = {}
    for body in bodies:
        system, *rest = body["messages"]
        assert system["role"] == "system" and WORKFLOW_HEADING in system["content"]
        assert SUBTASK_HEADING in system["content"] and system["content"].count(SUBTASK_HEADING) == 1
        assert all(SUBTASK_HEADING not in (m.get("content") or "") for m in rest)  # nothing after a user turn
        users = [m["content"] for m in rest if m["role"] == "user"]
        by_turn.setdefault((users[0], len(users)), set()).add(system["content"])
    assert all(len(contents) == 1 for contents in by_turn.values())  # one system message per turn
    for first in {first for first, _ in by_turn}:
        turns = [contents for (task, _), contents in sorted(by_turn.items()) if task == first]
        assert len({c for contents in turns for c in contents}) > 1  # it changes from turn to turn


def test_the_paper_texts_bfcl_subtask_memory_decomposes_the_instruction_once_before_any_call(bfcl_bank, tmp_path):
    """config/paper.yaml's `paper_text` variant on BFCL (§3.3, App. C), with the run options the grid plans for it:
    the student's labels, asked for before the first step, are the subtask queries, and the segments sit in the
    system message from the first request on; no turn retrieves its own."""
    paper = active_config(yaml.safe_load((REPO / "config/paper.yaml").read_text()), REPO / "config")
    grid = Grid(paper)
    cell = next(c for c in grid.cells("paper_text") if (c["benchmark"], c["memcfg"]) == ("bfcl", "wf_st_fn"))
    planned = shlex.split(grid.memory_args(Wildcards(cell | {"k": "wf1_st1_fn1"})))
    options = [word for flag, word in itertools.pairwise(planned) if flag == "--memory-option"]
    assert "per_turn=false" in options and "decompose_input=task" in options
    labels = ["list the current folder", "move the requested file"]
    decompositions = []

    def decomposing(request):
        asked = request["messages"][-1]["content"]
        if "JSON array of strings" in asked:
            decompositions.append(asked)
            return json.dumps(labels)
        return without_memory(request)

    with ScriptedServer(decomposing) as server:
        assert main(["run", "bfcl", "--agent", f"vllm:scripted@{server.url}", "--prompting", "official",
                     "--benchmark-option", "harness=official", "--tasks", ",".join(SOLVED[:4]), "--out",
                     str(tmp_path / "s.jsonl"), "--memory", str(bfcl_bank), "--memory-config", "wf_st", "--protocol",
                     "shared", "--delta", "wf=-1,st=-1", "--no-progress",
                     *(f"--memory-option={option}" for option in options)]) == 0
        bodies = [r.body for r in server.chat_requests() if "JSON array of strings" not in
                  r.body["messages"][-1]["content"]]
    records = [json.loads(line) for line in (tmp_path / "s.jsonl").read_text().splitlines()]
    assert all(r["success"] for r in records) and records[0]["memory"]["per_turn"] is False
    for record in records:
        assert [q["query"] for q in record["memory_queries"] if q["type"] == "subtask"] == labels
        assert {e["type"] for e in record["system_memory"]} == {"workflow", "subtask"}
        assert all(not turn["injected_memory"] for turn in record["turns"])
    assert all(SUBTASK_HEADING in body["messages"][0]["content"] for body in bodies)
    # the decomposition reads the whole task: every user turn and the tools' names
    bfcl = create_benchmark("bfcl")
    for task_id, asked in zip(SOLVED[:4], decompositions):
        episode = bfcl.start(task_id)
        assert len(episode.known_turns()) > 1 and all(turn in asked for turn in episode.known_turns())
        assert all(tool["function"]["name"] in asked for tool in episode.tools)


def test_per_turn_true_appends_to_the_user_message_as_before(bfcl_bank, tmp_path):
    bodies, records = student_run(bfcl_bank, tmp_path / "s.jsonl", "--memory-option", "per_turn=true")
    assert all(r["success"] for r in records) and records[0]["memory"]["per_turn"] is True
    assert "turn_memory" not in records[0]["memory"]
    last = bodies[-1]["messages"]
    assert SUBTASK_HEADING not in last[0]["content"]
    assert any(m["role"] == "user" and SUBTASK_HEADING in m["content"] for m in last)


def test_placement_before_puts_memory_ahead_of_the_system_prompt(bfcl_bank, tmp_path):
    with ScriptedServer(policy) as server:
        for placement in ("after", "before"):
            assert main(["run", "bfcl", "--agent", f"vllm:scripted@{server.url}", "--tasks", SOLVED[0],
                         "--out", str(tmp_path / f"{placement}.jsonl"), "--memory", str(bfcl_bank),
                         "--memory-config", "wf", "--protocol", "shared", "--delta", "wf=-1", "--no-progress",
                         "--memory-option", f"placement={placement}"]) == 0
        first_of_second = json.loads((tmp_path / "after.jsonl").read_text())["n_steps"]
        after, before = (server.chat_requests()[i].body["messages"][0]["content"] for i in (0, first_of_second))
    assert after.index(WORKFLOW_HEADING) > after.index("<retrieved-memory>") > 0  # memory is delimited (item 12)
    assert before.startswith("<retrieved-memory>") and before.index(WORKFLOW_HEADING) < before.index("</retrieved")
    assert sorted(p.strip() for p in after.split("\n\n")) == sorted(p.strip() for p in before.split("\n\n"))
    record = json.loads((tmp_path / "before.jsonl").read_text().splitlines()[0])
    assert record["memory"]["placement"] == "before"
    assert "placement" not in json.loads((tmp_path / "after.jsonl").read_text().splitlines()[0])["memory"]


def test_a_function_hint_carries_the_functions_doc_with_fn_doc(bfcl_bank):
    task = TaskContext("new", "new", "Move the report into a new folder.")
    plain = open_memory(bfcl_bank, "fn_only", protocol="shared").after_error(task, ["mkdir"])
    with_doc = open_memory(bfcl_bank, "fn_only", protocol="shared", options={"fn_doc": "true"}).after_error(
        task, ["mkdir"])
    assert plain.records and with_doc.records == plain.records
    doc = load_prompt("memory_function_doc").splitlines()[0].format(function="mkdir")
    assert with_doc.text.startswith(plain.text) and doc not in plain.text
    assert doc in with_doc.text and '"name":"mkdir"' in with_doc.text and '"dir_name"' in with_doc.text


def test_bad_paper_options_are_named(bfcl_bank):
    for options, message in (({"turn_memory": "system"}, "turn_memory=system .* needs per_turn=true"),
                             ({"placement": "middle"}, "placement must be one of after, before"),
                             ({"prompts": "mine"}, "prompts must be one of generic, benchmark")):
        with pytest.raises(AmdError, match=message):
            open_memory(bfcl_bank, "wf_st", options=options)


def test_prompts_benchmark_picks_a_benchmarks_own_prompt_where_there_is_one():
    assert benchmark_prompt("decompose", "appworld") == "decompose_appworld"
    assert benchmark_prompt("decompose", "bfcl") == "decompose"
    assert benchmark_prompt("memory_segment", "appworld") == "memory_segment_appworld"
    assert "log in to" in load_prompt("decompose_appworld") and "show_account_passwords" in load_prompt(
        "decompose_appworld")


def writer_answering(insight: str):
    asked = []

    def chat(messages):
        asked.append(messages[-1]["content"])
        if "JSON array only" in messages[-1]["content"]:
            return ChatReply(text="not a segmentation")  # the rules segments stand in
        return ChatReply(text=insight)

    return chat, asked


def test_a_long_insight_is_trimmed_with_insights_trim_and_rejected_by_default():
    long_insight = ("Call GorillaFileSystem.mkdir first, then GorillaFileSystem.mv. " * 30).strip()  # 180 words
    record = all_records()[0]
    bfcl = create_benchmark("bfcl")
    chat, _ = writer_answering(long_insight)
    rejected = build_entries(record, bfcl, chat, types=("workflow",))
    kept = build_entries(record, bfcl, chat, types=("workflow",), settings=BuildSettings(insights="trim"))
    assert not rejected.workflow and rejected.audit["insights_rejected"] == 1
    insight = kept.workflow[0]["insight"]
    assert len(insight.split()) <= 120 and insight.endswith("GorillaFileSystem.mv.")
    assert kept.audit["insights_trimmed"] == 1


def test_observation_chars_sets_where_entries_cut_observations():
    record = all_records()[0]
    long_output = json.dumps({"current_directory_content": [f"file_{i}.txt" for i in range(80)]})
    record["turns"][0]["steps"][0]["observations"] = [long_output]
    bfcl = create_benchmark("bfcl")
    short = build_entries(record, bfcl, types=("function",)).function[0]["code"]
    longer = build_entries(record, bfcl, types=("function",),
                           settings=BuildSettings(observation_chars=600)).function[0]["code"]
    assert len(short.split("# -> ")[-1]) == 300 and len(longer.split("# -> ")[-1]) == 600


def test_prompts_benchmark_gives_the_writer_the_benchmarks_own_prompts():
    record = all_records()[0]

    class AppWorldLike:
        name = "appworld"

        def function_info(self, name):
            return create_benchmark("bfcl").function_info(name)

    chat, asked = writer_answering("Call GorillaFileSystem.mkdir, then GorillaFileSystem.mv.")
    build_entries(record, AppWorldLike(), chat, types=("workflow", "subtask"),
                  settings=BuildSettings(prompts="benchmark"))
    assert asked[0].startswith(load_prompt("memory_workflow_appworld").split("{")[0].strip()[:60])
    assert "log in to venmo" in asked[1]
    chat, asked = writer_answering("Call GorillaFileSystem.mkdir, then GorillaFileSystem.mv.")
    build_entries(record, AppWorldLike(), chat, types=("workflow",))
    assert "AppWorld" not in asked[0]


def test_build_settings_are_checked_and_recorded_in_the_manifest(tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", all_records())
    with pytest.raises(AmdError, match="build option observation_chars must be a whole number of at least 20"):
        build_bank([path], "amd", "rules", "hash:64", tmp_path / "bad", options={"observation_chars": "many"})
    with pytest.raises(AmdError, match="build option insights must be one of reject, trim, keep"):
        BuildSettings.described("insights=all")
    manifest = build_bank([path], "amd", "rules", "hash:64", tmp_path / "bank",
                          options={"insights": "trim", "observation_chars": "500"})
    assert manifest["build_settings"] == "prompts=generic,insights=trim,observation_chars=500"
    # what an online run reads back, to distil the student's successes the way the bank was built
    assert BuildSettings.described(manifest["build_settings"]) == BuildSettings(insights="trim", observation_chars=500)
    assert "build_settings" not in build_bank([path], "amd", "rules", "hash:64", tmp_path / "plain")


def test_only_the_first_code_block_runs_and_a_cut_block_runs_as_written():
    (first,), kept = parse_first_code_block("I will look.\n```python\nprint(1)\n```\nand\n```python\nprint(2)\n```")
    assert first.code == "print(1)" and kept.endswith("print(1)\n```")
    (cut,), kept = parse_first_code_block("Go.\n```python\nx = 1\nprint(x")
    assert cut.code == "x = 1\nprint(x" and kept.endswith("print(x\n```")
    (none,), _ = parse_first_code_block("No code today.")
    assert none.malformed and none.code is None


def conversation(steps: int, output: str) -> list[dict]:
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "Task: T"}]
    for i in range(steps):
        messages += [{"role": "assistant", "content": f"step {i}\n```python\nprint({i})\n```"},
                     {"role": "user", "content": f"Output:\n```\n{output}{i}\n```"}]
    return messages


def test_history_trimming_hides_old_outputs_first_then_drops_the_oldest_steps():
    messages = conversation(10, "x" * 1000)
    assert trimmed(messages, 20_000, head=2) is messages  # within the budget: untouched
    hidden = trimmed(messages, 6_000, head=2)
    assert hidden[:2] == messages[:2] and len(hidden) == len(messages)
    assert hidden[-5:] == messages[-5:]  # the last messages keep their outputs
    assert sum(len(m["content"]) for m in hidden[2:]) <= 6_000 and "not shown" in hidden[3]["content"]
    dropped = trimmed(messages, 2_500, head=2)
    assert len(dropped) < len(messages) and dropped[-1] == messages[-1]
    assert "steps of this conversation are not shown" in dropped[1]["content"] and messages[1]["content"] == "Task: T"
    assert sum(len(m["content"]) for m in dropped[2:]) <= 2_500 and dropped[2]["role"] == "assistant"


def test_appworld_options_a_preset_and_single_options_in_its_place():
    assert harness_from_options() == AppWorldHarness() and AppWorldHarness().describe() == {}
    assert harness_from_options(harness="paper") == PAPER
    mixed = harness_from_options(harness="paper", history_chars="0", code_blocks="all")
    assert mixed.history_chars == 0 and mixed.code_blocks == "all" and mixed.output_chars == 20_000
    assert harness_from_options(step_cap="scored").describe() == {"step_cap": "scored"}
    assert harness_from_options(failing_call="line").describe() == {"failing_call": "line"}
    assert PAPER.failing_call == "read"  # the project's rule (after the paper's Fig. 9) is the default of both presets
    for options, message in (({"harness": "ace"}, "harness must be one of amd, paper"),
                             ({"code_blocks": "last"}, "code_blocks must be one of all, first"),
                             ({"output_chars": "lots"}, "output_chars must be a whole number")):
        with pytest.raises(AmdError, match=message):
            harness_from_options(**options)
    assert cut_output("abcdef", 4) == "abcd\n[2 more characters not shown]" and cut_output("abc", 0) == "abc"
