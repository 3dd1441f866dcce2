"""Retrieval and injection: FAISS round trip, leakage protocols, proactive/per-turn/reactive hooks, decomposition."""

import json
import logging

import numpy as np
import pytest
from test_memory_fixtures import all_records, call, record, reply, step, write_jsonl

from amd.agent.hooks import Injection, TaskContext
from amd.errors import AmdError
from amd.llm.base import ChatReply
from amd.memory.amd.decompose import decompose_instruction
from amd.memory.bank import load_bank
from amd.memory.build import build_bank
from amd.memory.embed import get_embedder
from amd.memory.method import open_memory
from amd.memory.protocols import eval_task_ids, split_groups
from amd.vocabulary import memory_configs

EMBEDDER = "hash:256"
NOTHING = Injection()


@pytest.fixture
def bank_dir(tmp_path):
    build_bank([write_jsonl(tmp_path / "t.jsonl", all_records())], "amd", "rules", EMBEDDER, tmp_path / "bank")
    return tmp_path / "bank"


def task(task_id, instruction, labels=None):
    """A task whose student answers the decomposition with `labels` (no student: the instruction is the label)."""
    student = None if labels is None else (lambda messages: ChatReply(text=json.dumps(labels)))
    return TaskContext(task_id, task_id, instruction, student)


def hooks_for(bank_dir, config, per_turn=False, representation=None, **settings):
    options = {"per_turn": str(per_turn)} | ({"representation": representation} if representation else {})
    return open_memory(bank_dir, config, options=options, **settings)


def test_faiss_round_trip_returns_each_entry_for_its_own_text(bank_dir):
    bank = load_bank(bank_dir)
    embedder = get_embedder(EMBEDDER)
    for memory_type, field in (("workflow", "query"), ("subtask", "description")):
        assert bank.indexes[memory_type].ntotal == len(bank.entries[memory_type]) > 0
        for entry in bank.entries[memory_type]:
            (hit, score), *_ = bank.search(memory_type, embedder.embed_one(entry[field]), 1, delta=-1.0)
            assert hit["id"] == entry["id"] and score == pytest.approx(1.0, abs=1e-5)
    expected = embedder.embed([e["reasoning"] for e in bank.entries["function"]])
    assert np.allclose(bank.vectors("function"), expected, atol=1e-6)


def test_self_excluded_never_returns_the_task_own_entries(bank_dir):
    hooks = hooks_for(bank_dir, "wf_st_fn", k=5, delta=-1.0)
    per_turn = hooks_for(bank_dir, "wf_st_fn", per_turn=True, k=5, delta=-1.0)
    bank = load_bank(bank_dir)
    for rec in all_records():
        me = task(rec["task_id"], rec["instruction"], [t["user"] for t in rec["turns"]])
        names = [c["name"] for t in rec["turns"] for s in t["steps"] for c in s["calls"]]
        records = hooks.task_start(me).records
        turn_records = per_turn.user_turn(me, rec["turns"][0]["user"]).records
        fn_records = hooks.after_error(me, names + ["add", "send_message"]).records
        assert all(r["source_task_id"] != me.task_id for r in records + turn_records + fn_records), me.task_id
        if me.task_id != "multi_turn_base_905":  # others exist to retrieve
            assert records
    # the same query under the leaky protocol does return the task's own workflow first
    shared = hooks_for(bank_dir, "wf", protocol="shared", delta=-1.0)
    rec = all_records()[0]
    records = shared.task_start(task(rec["task_id"], rec["instruction"])).records
    assert records[0]["source_task_id"] == rec["task_id"] and records[0]["similarity"] == pytest.approx(1.0)
    assert bank.manifest_sha256 == shared.describe()["bank_sha256"]


def test_shared_protocol_logs_a_warning(bank_dir, caplog):
    with caplog.at_level(logging.WARNING, logger="amd.memory"):
        hooks_for(bank_dir, "wf", protocol="shared")
    assert any("leaky" in r.getMessage() for r in caplog.records)


def test_cross_split_is_deterministic_disjoint_and_70_30():
    ids = [f"multi_turn_base_{i}" for i in range(200)]
    memory, held_out = split_groups(ids, seed=0)
    assert (memory, held_out) == split_groups(list(reversed(ids)), seed=0)
    assert len(memory) == 140 and len(held_out) == 60
    assert not set(memory) & set(held_out) and set(memory) | set(held_out) == set(ids)
    assert split_groups(ids, seed=1) != (memory, held_out)


def test_cross_split_retrieves_only_from_the_memory_side(tmp_path):
    records = [record(f"multi_turn_base_{i}", [(f"Add {10 + i} and {20 + i} for order {i}.", [
        step([call("add", a=10 + i, b=20 + i)], [f'{{"result": {30 + 2 * i}}}']), reply()])]) for i in range(20)]
    build_bank([write_jsonl(tmp_path / "t.jsonl", records)], "amd", "rules", EMBEDDER, tmp_path / "bank")
    memory, held_out = split_groups([r["task_id"] for r in records], seed=3)
    assert eval_task_ids(tmp_path / "bank", seed=3) == held_out
    hooks = hooks_for(tmp_path / "bank", "wf_st_fn", protocol="cross_split", split_seed=3, k=20, delta=-1.0)
    for task_id in held_out:
        found = hooks.task_start(task(task_id, "Add two numbers for an order.")).records
        fn_found = hooks.after_error(task(task_id, "Add two numbers."), ["add"]).records
        assert found and {r["source_task_id"] for r in found + fn_found} <= set(memory)
    with pytest.raises(AmdError, match="memory side of the cross split"):
        hooks.task_start(task(memory[0], "Add."))
    assert hooks.describe()["split_seed"] == 3


def test_proactive_injects_workflow_and_deduplicated_subtasks_after_decomposition(bank_dir):
    hooks = hooks_for(bank_dir, "wf_st", protocol="shared", delta=-1.0)
    asked = []

    def student(messages):
        asked.append(messages[-1]["content"])
        return ChatReply(text='["place order", "place order", "get watchlist"]')

    injected = hooks.task_start(TaskContext("new_task", "new_task", "Buy shares of the first watchlist stock.",
                                            student))
    text, records = injected.text, injected.records
    assert len(asked) == 1 and "Buy shares of the first watchlist stock." in asked[0]
    subtask_ids = [r["entry_id"] for r in records if r["type"] == "subtask"]
    assert len(subtask_ids) == len(set(subtask_ids)) >= 1
    assert records[0]["type"] == "workflow" and records[0]["query"].startswith("Buy shares")
    assert text.index("Strategy from a similar solved task") < text.index("Worked examples")
    assert "```python" in text  # subtask examples default to code


def test_wf_config_never_calls_decompose_and_delta_filters(bank_dir):
    hooks = hooks_for(bank_dir, "wf", delta={"workflow": 0.999})

    def student(_):
        raise AssertionError("wf must not decompose")

    assert hooks.task_start(TaskContext("new_task", "new_task", "Buy 100 shares of NVDA.", student)) == NOTHING
    assert hooks.describe() == {"config": "wf", "method": "amd", "bank": str(bank_dir),
                                "bank_sha256": load_bank(bank_dir).manifest_sha256, "protocol": "self_excluded",
                                "k": {"workflow": 1}, "delta": {"workflow": 0.999},
                                "representation": {"workflow": "prose"}, "per_turn": False}


def test_per_turn_moves_subtask_retrieval_to_user_turns(bank_dir):
    hooks = hooks_for(bank_dir, "wf_st", protocol="shared", delta=-1.0, per_turn=True)
    records = hooks.task_start(task("x", "Send a message to my colleague.")).records
    assert {r["type"] for r in records} == {"workflow"}
    turn = hooks.user_turn(task("x", "Send."), "Tell my colleague that the report is archived.")
    assert turn.records[0]["type"] == "subtask" and turn.records[0]["query"].startswith("Tell my colleague")
    assert "send_message(" in turn.text
    off = hooks_for(bank_dir, "wf_st", protocol="shared", delta=-1.0)
    assert off.user_turn(task("x", "Send."), "Tell my colleague.") == NOTHING


def test_reactive_ranks_records_by_instruction_similarity(tmp_path):
    topics = {"alpha": "Compute the invoice total for alpha orders", "beta": "Sum the beta survey scores",
              "gamma": "Add gamma rocket fuel amounts"}
    records = [record(f"t_{name}", [(instruction, [step([call("add", a=11, b=22)], ['{"result": 33}'],
                                                        text=f"I will add the {name} numbers."), reply()])])
               for name, instruction in topics.items()]
    build_bank([write_jsonl(tmp_path / "t.jsonl", records)], "amd", "rules", EMBEDDER, tmp_path / "bank")
    hooks = hooks_for(tmp_path / "bank", "fn_only", k={"function": 2})
    hint = hooks.after_error(task("t_new", "Sum the beta survey scores please"), ["add", "unknown_fn"])
    found = hint.records
    assert [r["source_task_id"] for r in found][:1] == ["t_beta"] and len(found) == 2
    assert found[0]["similarity"] >= found[1]["similarity"] and found[0]["query"] == "add"
    assert hint.text.startswith("## Hint: how add was used") and "add(a=11, b=22)" in hint.text
    # self exclusion also holds here: the beta task never gets its own record
    own = hooks.after_error(task("t_beta", "Sum the beta survey scores please"), ["add"]).records
    assert "t_beta" not in {r["source_task_id"] for r in own}
    assert hooks.after_error(task("t_new", "x"), ["no_such_function"]) == NOTHING
    assert hooks.task_start(task("t_new", "x")) == NOTHING  # fn_only injects nothing up front


def test_representation_is_chosen_at_render_time(bank_dir):
    prose = hooks_for(bank_dir, "st_only", protocol="shared", delta=-1.0, representation="st=prose")
    text = prose.task_start(task("x", "Buy shares.", ["place order"])).text
    assert "```" not in text and "The agent called" in text
    code_wf = hooks_for(bank_dir, "wf", protocol="shared", delta=-1.0, representation="workflow=code")
    text = code_wf.task_start(task("x", "Buy shares.")).text
    assert "```python" in text and "(" in text and "Precondition" not in text


def test_zero_shot_has_no_hooks_and_bad_names_list_the_allowed_ones(bank_dir):
    assert hooks_for(bank_dir, "zero_shot") is None
    with pytest.raises(AmdError, match="allowed: zero_shot, wf, wf_st"):
        hooks_for(bank_dir, "wf_st_fx")
    with pytest.raises(AmdError, match="allowed: self_excluded, cross_split, shared"):
        hooks_for(bank_dir, "wf", protocol="leave_one_out")
    with pytest.raises(AmdError, match="k for workflow"):
        hooks_for(bank_dir, "wf", k=0)
    with pytest.raises(AmdError, match="representation"):
        hooks_for(bank_dir, "wf", representation="wf=yaml")
    with pytest.raises(AmdError, match="no run option"):
        open_memory(bank_dir, "wf", options={"per_turns": "true"})
    assert {"zero_shot", "wf", "wf_st", "wf_st_fn", "wf_fn", "st_only", "fn_only"} <= set(memory_configs())


# ---- decomposition ---------------------------------------------------------------------------------------------------

def chat_answering(text, error=None):
    seen = []

    def chat(messages):
        seen.append(messages)
        return ChatReply(text=text, error=error)

    return chat, seen


def test_decomposition_parses_a_json_array_and_caps_it_at_six():
    chat, seen = chat_answering('```json\n["find file", "move file", "find file", "a", "b", "c", "d", "e"]\n```')
    assert decompose_instruction(chat, "Move my report.") == ["find file", "move file", "a", "b", "c", "d"]
    assert "Move my report." in seen[0][-1]["content"]


@pytest.mark.parametrize("text,error", [("Sure! First find the file.", None), ('{"a": 1}', None),
                                        ("[1, 2]", None), ("", "server down")])
def test_malformed_decomposition_falls_back_to_the_instruction(text, error, caplog):
    with caplog.at_level(logging.WARNING, logger="amd.memory"):
        assert decompose_instruction(chat_answering(text, error)[0], "Move my report.") == ["Move my report."]
    assert any("decomposition unusable" in r.getMessage() for r in caplog.records)


def test_injection_records_follow_the_trajectory_schema(bank_dir):
    from amd.schema import validate

    hooks = hooks_for(bank_dir, "wf_st_fn", delta=-1.0)
    rec = all_records()[1]
    system = hooks.task_start(task("multi_turn_base_999", rec["instruction"])).records
    hints = hooks.after_error(task("multi_turn_base_999", rec["instruction"]), ["mv"]).records
    rec = {**rec, "system_memory": system, "memory": hooks.describe()}
    rec["turns"][0]["steps"][0]["injected_memory"] = hints
    validate(json.loads(json.dumps(rec)))
    assert system and hints


def test_bank_representation_is_the_default_and_a_run_may_override_it(tmp_path):
    from amd.memory.amd.render import parse_representation

    assert parse_representation("wf=code, st=prose") == {"workflow": "code", "subtask": "prose"}
    build_bank([write_jsonl(tmp_path / "t.jsonl", all_records())], "amd", "rules", EMBEDDER, tmp_path / "bank",
               options={"representation": "wf=code, st=prose"})
    hooks = hooks_for(tmp_path / "bank", "wf_st", protocol="shared", delta=-1.0)
    assert hooks.describe()["representation"] == {"workflow": "code", "subtask": "prose"}
    text = hooks.task_start(task("x", "Buy shares.", ["place order"])).text
    assert "Precondition" not in text and "The agent called" in text
    override = hooks_for(tmp_path / "bank", "wf", protocol="shared", delta=-1.0, representation="wf=prose")
    assert "Precondition" in override.task_start(task("x", "Buy shares.")).text
    with pytest.raises(AmdError, match="bad memory representation"):
        parse_representation("wf=yaml")


def test_a_config_variant_brings_its_run_options_and_a_run_may_override_them(bank_dir, monkeypatch):
    from amd.registry import MEMORY_METHODS, Entry
    from amd.vocabulary import AMD_TYPES

    variant = {"wf_st_per_turn": {"types": ("wf", "st"), "options": {"per_turn": True}}}
    monkeypatch.setitem(MEMORY_METHODS._entries, "amd", Entry("amd", MEMORY_METHODS.entry("amd").target,
                                                              meta={"types": AMD_TYPES, "configs": variant}))
    assert memory_configs()["wf_st_per_turn"].options == (("per_turn", "True"),)
    assert open_memory(bank_dir, "wf_st_per_turn").describe()["per_turn"] is True
    assert open_memory(bank_dir, "wf_st_per_turn", options={"per_turn": "false"}).describe()["per_turn"] is False
