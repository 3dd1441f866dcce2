"""The authors' release's memory harness as switches (docs/findings/harnesses.md): value masking, what a subtask
entry shows, what it is embedded by, insight length. Each switch off is amd's way, on the release's."""

import json

import pytest
from test_memory_fixtures import all_records, call, file_and_message_task, record, step, write_jsonl
from test_workflow_args import Wildcards, load_config, parse_shell

from amd.agent.hooks import TaskContext
from amd.benchmarks.base import create_benchmark
from amd.cli import main
from amd.core.errors import AmdError
from amd.core.prompts import benchmark_prompt, load_prompt
from amd.llm.base import ChatReply
from amd.memory.bank import load_bank
from amd.memory.build import build_bank
from amd.memory.method import open_memory
from amd.memory.placeholders import ValueMask, masked_arguments, trajectory_values
from amd.memory.steps import steps_of
from amd.methods.amd.entries import BuildSettings, build_entries
from amd.workflow.grid import Grid

RAW_VALUES = ("final_report.pdf", "archive_2024", "USR003", "the report is archived")


@pytest.fixture(scope="module")
def bfcl():
    return create_benchmark("bfcl")


def entry_text(result, observations: bool = True) -> str:
    """What the entries show, their results left out unless `observations`."""
    shown = []
    for entry in result.subtask + result.function:
        code = [line if observations else line.split(" -> ")[0] for line in entry["code"].splitlines()]
        shown += [*code, entry.get("call", ""), entry.get("description", "")]
        shown += [entry["observation"]] if observations and "observation" in entry else []
    return "\n".join(shown)


def test_masked_values_put_placeholders_into_subtask_and_function_entries(bfcl):
    record = file_and_message_task()
    raw = build_entries(record, bfcl, types=("subtask", "function"))
    masked = build_entries(record, bfcl, types=("subtask", "function"), settings=BuildSettings(entry_values="masked"))
    assert all(value in entry_text(raw) for value in RAW_VALUES)
    assert not any(value in entry_text(masked, observations=False) for value in RAW_VALUES)
    mkdir = next(entry for entry in masked.function if entry["name"] == "mkdir")
    assert mkdir["call"] == "mkdir(dir_name='<FILE_PATH>')"
    # one value, one placeholder: the folder moved into is the folder made
    assert "mv(source='<FILE_PATH>', destination='<FILE_PATH>')" in masked.subtask[0]["code"]
    # masked keeps the results; scrubbed masks a JSON result's values and keeps its keys
    assert '"final_report.pdf", "notes.txt"' in masked.subtask[0]["code"]
    scrubbed = build_entries(record, bfcl, types=("subtask", "function"), settings=BuildSettings(entry_values="scrubbed"))
    assert not any(value in entry_text(scrubbed) for value in RAW_VALUES)
    assert '{"current_directory_content": ["<FILE_PATH>", "<FILE_PATH>"]}' in scrubbed.subtask[0]["code"]
    # what is embedded and ranked by is not what is shown: the function record's reasoning keeps the instruction
    assert "final_report.pdf" in mkdir["reasoning"]


def test_masking_keeps_flags_and_masks_inside_lists():
    assert masked_arguments({"force": True, "limit": None, "ids": [12, 34], "to": {"email": "a@b.co"}}) == {
        "force": True, "limit": None, "ids": ["<ID>", "<ID>"], "to": {"email": "<EMAIL>"}}
    calls = [call for step in steps_of(file_and_message_task()) for call in step.calls]
    assert ValueMask("masked", calls).text("send 'USR003' the note") == "send '<ID>' the note"
    assert dict(trajectory_values(calls))["USR003"] == "<ID>"


def test_value_masking_is_a_recorded_build_option_and_raw_banks_are_unchanged(tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", all_records())
    plain = build_bank([path], "amd", "rules", "hash:64", tmp_path / "plain")
    masked = build_bank([path], "amd", "rules", "hash:64", tmp_path / "masked", options={"entry_values": "masked"})
    assert "build_settings" not in plain
    assert masked["build_settings"] == "prompts=generic,insights=reject,observation_chars=300,entry_values=masked"
    assert BuildSettings.described(masked["build_settings"]).entry_values == "masked"
    explicit = build_bank([path], "amd", "rules", "hash:64", tmp_path / "explicit", options={"entry_values": "raw"})
    for name in ("subtask", "function"):
        assert (tmp_path / f"explicit/{name}.jsonl").read_bytes() == (tmp_path / f"plain/{name}.jsonl").read_bytes()
    assert "build_settings" not in explicit
    with pytest.raises(AmdError, match="build option entry_values must be one of raw, masked, scrubbed"):
        build_bank([path], "amd", "rules", "hash:64", tmp_path / "bad", options={"entry_values": "hidden"})


@pytest.fixture(scope="module")
def bank(tmp_path_factory):
    where = tmp_path_factory.mktemp("release-bank")
    path = write_jsonl(where / "t.jsonl", all_records())
    build_bank([path], "amd", "rules", "hash:256", where / "bank", options={"entry_values": "masked"})
    return where / "bank"


def subtask_block(bank, **options) -> str:
    task = TaskContext("new", "new", "Move 'final_report.pdf' into a new folder called 'archive_2024'.")
    hooks = open_memory(bank, "st_only", protocol="shared", delta={"st": -1}, options=options)
    return hooks.task_start(task).text


def test_subtask_view_calls_shows_at_most_n_calls_and_no_observations(bank):
    steps = subtask_block(bank)
    calls = subtask_block(bank, subtask_view="calls", subtask_calls=2)
    every = subtask_block(bank, subtask_view="calls")
    assert "# -> " in steps and "# user: " in steps
    assert "# -> " not in calls and "# user: " not in calls and "# -> " not in every
    code = calls.split("```python\n")[1].split("\n```")[0].splitlines()
    assert code == ["ls()", "mkdir(dir_name='<FILE_PATH>')"]
    assert "mv(source='<FILE_PATH>', destination='<FILE_PATH>')" in every
    hooks = open_memory(bank, "st_only", options={"subtask_view": "calls", "subtask_calls": 2})
    assert hooks.describe()["subtask_view"] == "calls" and hooks.describe()["subtask_calls"] == 2
    assert "subtask_view" not in open_memory(bank, "st_only").describe()
    assert subtask_block(bank, subtask_calls=2) == steps  # a limit on the calls view alone


def test_subtask_key_label_description_embeds_the_label_too(tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", all_records())
    manifest = build_bank([path], "amd", "rules", "hash:64", tmp_path / "bank",
                          options={"subtask_key": "label_description"})
    assert manifest["types"]["subtask"]["embedded"] == "key"
    entry = load_bank(tmp_path / "bank").entries["subtask"][0]
    assert entry["key"] == f"{entry['label']}: {entry['description']}"
    assert build_bank([path], "amd", "rules", "hash:64", tmp_path / "plain")["types"]["subtask"]["embedded"] == \
        "description"


def test_insights_keep_keeps_a_long_insight_whole(bfcl):
    long_insight = ("Call GorillaFileSystem.mkdir first, then GorillaFileSystem.mv. " * 30).strip()

    def chat(messages):
        return ChatReply(text="no segments" if "JSON array only" in messages[-1]["content"] else long_insight)

    kept = build_entries(all_records()[0], bfcl, chat, types=("workflow",), settings=BuildSettings(insights="keep"))
    assert kept.workflow[0]["insight"] == long_insight and not kept.audit["insights_rejected"]


def test_decompose_input_task_gives_the_student_every_known_turn_and_the_tools(bank):
    asked = []

    def student(messages, **_):
        asked.append(messages[-1]["content"])
        return ChatReply(text='["move file to folder"]')

    turns = ["Move 'final_report.pdf' into a new folder called 'archive_2024'.", "Tell USR003 it is archived."]
    task = TaskContext("new", "new", turns[0], student, turns=turns, tools=["mkdir", "mv", "send_message"])
    for options in ({}, {"decompose_input": "task"}):
        hooks = open_memory(bank, "st_only", protocol="shared", delta={"st": -1}, options=options)
        assert [r["query"] for r in hooks.task_start(task).records] == ["move file to folder"]
    plain, whole = asked
    assert turns[0] in plain and turns[1] not in plain and "send_message" not in plain
    assert all(turn in whole for turn in turns) and "mkdir, mv, send_message" in whole
    assert open_memory(bank, "st_only", options={"decompose_input": "task"}).describe()["decompose_input"] == "task"


def test_fn_rank_ranks_a_functions_records_by_instruction_turn_or_recent_calls(tmp_path):
    archive = record("multi_turn_base_801", [("Archive the quarterly report in a reports directory.", [
        step([call("mkdir", dir_name="reports")], ["None"], text="I will create the reports directory.")])])
    photos = record("multi_turn_base_802", [("Sort my holiday photos into an album.", [
        step([call("mkdir", dir_name="album")], ["None"], text="cd photos first, then mkdir the album for photos.")])])
    path = write_jsonl(tmp_path / "t.jsonl", [archive, photos])
    build_bank([path], "amd", "rules", "hash:256", tmp_path / "bank")
    task = TaskContext("new", "new", "Archive the quarterly report in a reports directory.",
                       turn="Now sort the holiday photos into an album.", calls=["cd(folder='photos')"])

    def first(**options) -> str:
        hint = open_memory(tmp_path / "bank", "fn_only", protocol="shared", options=options).after_error(task, ["mkdir"])
        return hint.records[0]["source_task_id"]

    assert first() == first(fn_rank="instruction") == "multi_turn_base_801"
    assert first(fn_rank="turn") == "multi_turn_base_802"
    assert first(fn_rank="calls") == "multi_turn_base_802"
    task.calls = ["ls()", "cd(folder='reports')"]
    assert first(fn_rank="calls") == "multi_turn_base_801"
    assert "fn_rank" not in open_memory(tmp_path / "bank", "fn_only").describe()


@pytest.mark.parametrize("benchmark", ["bfcl", "toolsandbox"])
def test_prompts_benchmark_gives_bfcl_and_toolsandbox_writers_their_own_prompts(benchmark):
    fields = {"instruction": "I", "functions": "F", "trajectory": "T", "max_words": 120, "n_steps": 3, "last_step": 2,
              "steps": "S", "hints": "H", "max_segments": 6, "max_label_words": 5}
    for name in ("memory_workflow", "memory_segment"):
        assert benchmark_prompt(name, benchmark) == f"{name}_{benchmark}"
        assert "{" not in load_prompt(f"{name}_{benchmark}").format(**fields).replace("{\"start_step", "")


def test_the_bfcl_writer_is_asked_with_bfcls_prompts(bfcl):
    asked = []

    def chat(messages):
        asked.append(messages[-1]["content"])
        return ChatReply(text="no segments" if "JSON array only" in messages[-1]["content"] else "Call mkdir.")

    build_entries(all_records()[0], bfcl, chat, types=("workflow", "subtask"), settings=BuildSettings(prompts="benchmark"))
    assert "multi-turn function-calling task (BFCL)" in asked[0] and "multi-turn function-calling run (BFCL)" in asked[1]


def test_the_paper_settings_bfcl_bank_holds_placeholders_where_the_release_masks(tmp_path):
    """config/paper.yaml's BFCL bank, built with the build options the grid plans for it, on oracle runs."""
    grid = Grid(load_config("paper.yaml"))
    cell = next(c for c in grid.cells("main_paper") if (c["benchmark"], c["memcfg"]) == ("bfcl", "wf_st_fn"))
    planned = parse_shell(f"amd memory build --trajectories t.jsonl {grid.build_args(Wildcards(cell, seed='0'))} "
                          "--embedder hash:64 --out b")
    tasks = ",".join(f"multi_turn_base_{n}" for n in (0, 1, 2, 3))
    assert main(["run", "bfcl", "--agent", "oracle", "--tasks", tasks, "--out", str(tmp_path / "o.jsonl"),
                 "--no-progress"]) == 0
    assert main(["memory", "build", "--trajectories", str(tmp_path / "o.jsonl"), "--embedder", "hash:64",
                 "--out", str(tmp_path / "bank"), *(f"--option={option}" for option in planned.option)]) == 0
    bank = load_bank(tmp_path / "bank")
    records = {r["task_id"]: r for r in map(json.loads, (tmp_path / "o.jsonl").read_text().splitlines())}
    for entry in bank.entries["subtask"] + bank.entries["function"]:
        calls = [c for step in steps_of(records[entry["source_task_id"]]) for c in step.calls]
        shown = entry["call"] if "call" in entry else "\n".join(
            line for line in entry["code"].splitlines() if not line.startswith("# "))
        assert not [value for value, _ in trajectory_values(calls) if value in shown], entry["id"]
    assert any("<" in entry["call"] for entry in bank.entries["function"])
    assert bank.manifest["types"]["subtask"]["embedded"] == "key"
