"""Retrieval and injection: FAISS round trip, leakage protocols, proactive/per-turn/reactive hooks, decomposition."""

import json
import logging

import numpy as np
import pytest
from test_memory_fixtures import all_records, call, record, reply, step, write_jsonl

from amd.agent.hooks import Injection, TaskContext
from amd.core.errors import AmdError
from amd.core.vocabulary import memory_configs
from amd.llm.base import ChatReply
from amd.memory.bank import load_bank
from amd.memory.build import build_bank
from amd.memory.embed import get_embedder
from amd.memory.method import open_memory
from amd.memory.protocols import eval_task_ids, split_units
from amd.methods.amd.decompose import decompose_instruction

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


def hooks_for(bank_dir, config, per_turn=False, representation=None, options=None, **settings):
    options = {"per_turn": str(per_turn)} | ({"representation": representation} if representation else {}) | \
        (options or {})
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
    memory, held_out = split_units(ids, seed=0)
    assert (memory, held_out) == split_units(list(reversed(ids)), seed=0)
    assert len(memory) == 140 and len(held_out) == 60
    assert not set(memory) & set(held_out) and set(memory) | set(held_out) == set(ids)
    assert split_units(ids, seed=1) != (memory, held_out)


def test_cross_split_retrieves_only_from_the_memory_side(tmp_path):
    records = [record(f"multi_turn_base_{i}", [(f"Add {10 + i} and {20 + i} for order {i}.", [
        step([call("add", a=10 + i, b=20 + i)], [f'{{"result": {30 + 2 * i}}}']), reply()])]) for i in range(20)]
    build_bank([write_jsonl(tmp_path / "t.jsonl", records)], "amd", "rules", EMBEDDER, tmp_path / "bank")
    memory, held_out = split_units([r["task_id"] for r in records], seed=3)
    assert eval_task_ids(tmp_path / "bank", "cross_split", seed=3) == held_out
    hooks = hooks_for(tmp_path / "bank", "wf_st_fn", protocol="cross_split", split_seed=3, k=20, delta=-1.0)
    for task_id in held_out:
        found = hooks.task_start(task(task_id, "Add two numbers for an order.")).records
        fn_found = hooks.after_error(task(task_id, "Add two numbers."), ["add"]).records
        assert found and {r["source_task_id"] for r in found + fn_found} <= set(memory)
    with pytest.raises(AmdError, match="memory side of the cross split"):
        hooks.task_start(task(memory[0], "Add."))
    assert hooks.describe()["split_seed"] == 3


def sibling_records() -> list[dict]:
    """The fixture runs, with tasks 901 and 902 made variants of one scenario (group `pair`)."""
    records = all_records()
    for rec in records[:2]:
        rec["task_group"] = "pair"
    return records


@pytest.mark.parametrize("protocol,unit", [("self_excluded", "group"), ("self_excluded_task", "task")])
def test_the_exclusion_unit_decides_whether_a_sibling_is_retrievable_and_never_the_task_itself(tmp_path, protocol,
                                                                                                unit):
    records = sibling_records()
    build_bank([write_jsonl(tmp_path / "t.jsonl", records)], "amd", "rules", EMBEDDER, tmp_path / "bank")
    hooks = hooks_for(tmp_path / "bank", "wf_st_fn", protocol=protocol, k=10, delta=-1.0)
    assert hooks.describe()["excluded"] == unit  # the trajectory says what was excluded
    for me, sibling in ((records[0], records[1]), (records[1], records[0])):
        labels = json.dumps([t["user"] for t in sibling["turns"]])
        context = TaskContext(me["task_id"], "pair", me["instruction"], lambda messages, text=labels: ChatReply(text=text))
        names = [c["name"] for t in sibling["turns"] for s in t["steps"] for c in s["calls"]]
        found = hooks.task_start(context).records + hooks.after_error(context, names).records
        sources = {r["source_task_id"] for r in found}
        assert me["task_id"] not in sources  # never its own memory, under either unit
        assert (sibling["task_id"] in sources) is (unit == "task"), me["task_id"]
        # the audit fields: each injection names its source task and group
        assert {r["source_group"] for r in found if r["source_task_id"] == sibling["task_id"]} <= {"pair"}
        assert all(r["source_group"] == r["source_task_id"] for r in found if r["source_task_id"] != sibling["task_id"])


def test_a_task_level_cross_split_splits_tasks_so_a_held_out_task_may_see_its_sibling(tmp_path):
    records = [record(f"multi_turn_base_{i}", [(f"Add {10 + i} and {20 + i} for order {i}.", [
        step([call("add", a=10 + i, b=20 + i)], [f'{{"result": {30 + 2 * i}}}']), reply()])]) for i in range(20)]
    for rec in records:
        rec["task_group"] = f"pair_{int(rec['task_id'].rsplit('_', 1)[1]) // 2}"
    build_bank([write_jsonl(tmp_path / "t.jsonl", records)], "amd", "rules", EMBEDDER, tmp_path / "bank")
    group_of = {r["task_id"]: r["task_group"] for r in records}
    by_group = eval_task_ids(tmp_path / "bank", "cross_split", seed=3)
    by_task = eval_task_ids(tmp_path / "bank", "cross_split_task", seed=3)
    assert by_task == split_units(group_of, seed=3)[1] and len(by_task) == 6
    assert {group_of[t] for t in by_group} == set(split_units(group_of.values(), seed=3)[1])  # whole groups held out
    hooks = hooks_for(tmp_path / "bank", "wf", protocol="cross_split_task", split_seed=3, k=20, delta=-1.0)
    assert hooks.describe()["excluded"] == "task" and hooks.describe()["split_seed"] == 3
    seen_sibling = False
    for task_id in by_task:
        sources = {r["source_task_id"] for r in hooks.task_start(TaskContext(task_id, group_of[task_id],
                                                                             "Add two numbers.")).records}
        assert sources and not sources & set(by_task)  # memory only from the memory side's tasks
        seen_sibling |= any(group_of[source] == group_of[task_id] for source in sources)
    assert seen_sibling  # a held-out task's sibling is on the memory side: the group split never allows that
    with pytest.raises(AmdError, match="memory side of the cross split"):
        hooks.task_start(TaskContext(records[0]["task_id"] if records[0]["task_id"] not in by_task
                                     else records[1]["task_id"], "pair_0", "Add."))


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

    held_back = hooks.task_start(TaskContext("new_task", "new_task", "Buy 100 shares of NVDA.", student))
    assert (held_back.text, held_back.records) == ("", [])
    (query,) = held_back.queries  # what δ held back is recorded: the query, nothing found, how close the best came
    assert (query["type"], query["query"], query["found"]) == ("workflow", "Buy 100 shares of NVDA.", 0)
    assert 0 < query["best"] < 0.999
    assert hooks.describe() == {"config": "wf", "method": "amd", "bank": str(bank_dir),
                                "bank_sha256": load_bank(bank_dir).manifest_sha256, "protocol": "self_excluded",
                                "excluded": "group",
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
    unknown = hooks.after_error(task("t_new", "x"), ["no_such_function"])
    assert (unknown.text, unknown.records) == ("", [])
    assert unknown.queries == [{"type": "function", "query": "no_such_function", "found": 0, "best": None}]
    assert [(q["query"], q["found"]) for q in hint.queries] == [("add", 2), ("unknown_fn", 0)]
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
    with pytest.raises(AmdError, match="allowed: self_excluded, self_excluded_task, cross_split, cross_split_task, "
                                      "shared"):
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
    from amd.core.schema import validate

    hooks = hooks_for(bank_dir, "wf_st_fn", delta=-1.0)
    rec = all_records()[1]
    system = hooks.task_start(task("multi_turn_base_999", rec["instruction"])).records
    hints = hooks.after_error(task("multi_turn_base_999", rec["instruction"]), ["mv"]).records
    rec = {**rec, "system_memory": system, "memory": hooks.describe()}
    rec["turns"][0]["steps"][0]["injected_memory"] = hints
    validate(json.loads(json.dumps(rec)))
    assert system and hints


def test_bank_representation_is_the_default_and_a_run_may_override_it(tmp_path):
    from amd.methods.amd.render import parse_representation

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
    import dataclasses

    from amd.core.spec import Config
    from amd.methods.amd import spec

    variant = dataclasses.replace(spec.SPEC, configs={"wf_st_per_turn": Config(("wf", "st"), {"per_turn": True})})
    monkeypatch.setattr(spec, "SPEC", variant)
    assert memory_configs()["wf_st_per_turn"].options == (("per_turn", "True"),)
    assert open_memory(bank_dir, "wf_st_per_turn").describe()["per_turn"] is True
    assert open_memory(bank_dir, "wf_st_per_turn", options={"per_turn": "false"}).describe()["per_turn"] is False


# ---- checked decomposition (beyond the paper) ----------------------------------------------------------------------

def test_merge_keeps_the_subtasks_a_majority_of_samples_name_in_their_order():
    from amd.methods.amd.decompose import merge_by_agreement

    samples = [["get watchlist stocks", "place buy order", "send report"],
               ["get the watchlist", "place a buy order"],
               ["check watchlist stocks", "get stock price", "place buy order"],
               ["find file", "delete file"]]
    # 3 of 4 name the watchlist, 3 of 4 the order (paraphrases by word overlap); the rest are minorities
    assert merge_by_agreement(samples) == [("get watchlist stocks", 3), ("place buy order", 3)]
    assert merge_by_agreement([["a thing"], ["another one"], []]) == []  # no majority: nothing agreed
    assert merge_by_agreement([["send message"], ["send message"], ["get balance"], ["get balance"]]) == []  # 2 of 4


DECOMPOSE_CUE = "JSON array of strings only"
SINGLE_SHOT = '["get stock price", "send email"]'  # the crafted single shot: wrong subtasks
BY_SEED = {1000: '["get watchlist stocks", "place buy order"]', 1001: '["get the watchlist", "place a buy order"]',
           1002: '["check watchlist stocks", "place buy order", "send email"]',
           1003: '["get stock price"]', 1004: "I cannot answer that."}


def decomposing_student(request):
    assert DECOMPOSE_CUE in request["messages"][-1]["content"]
    if request["temperature"] == 0 and request["seed"] == 0:  # the run's own sampling: the single shot
        return SINGLE_SHOT
    return BY_SEED[request["seed"]]


def test_checked_decomposition_on_a_scripted_server_differs_from_the_single_shot(bank_dir):
    from scripted_server import ScriptedServer

    from amd.llm import open_model

    hooks = hooks_for(bank_dir, "wf_st", protocol="shared", delta=-1.0, options={"decompose_samples": "5"})
    plain = hooks_for(bank_dir, "wf_st", protocol="shared", delta=-1.0)
    with ScriptedServer(decomposing_student) as server, \
            open_model(f"vllm:student@{server.url}", {"max_retries": 0, "timeout_s": 5}) as model:
        me = TaskContext("new", "new", "Buy 100 shares of my first watchlist stock.", model.chat, seed=0)
        checked = hooks.task_start(me)
        sent = [(r.body["temperature"], r.body["seed"]) for r in server.chat_requests()]
        single = plain.task_start(me)
        again = hooks.task_start(me)
        requests_after = len(server.chat_requests())
    decomposition = checked.details["decomposition"]
    assert sent == [(0, 0)] + [(0.7, seed) for seed in range(1000, 1005)]  # one request per sample, own seed each
    assert decomposition["single_shot"] == ["get stock price", "send email"]
    assert decomposition["merged"] == ["get watchlist stocks", "place buy order"]
    assert decomposition["differs"] is True and decomposition["agreed"] is True
    assert decomposition["support"] == [3, 3] and decomposition["seeds"] == [1000, 1001, 1002, 1003, 1004]
    assert decomposition["samples"][4] == [] and decomposition["temperature"] == 0.7
    # retrieval asks with the merged labels (a label whose hits another label already brought adds no record)
    assert {r["query"] for r in checked.records if r["type"] == "subtask"} <= set(decomposition["merged"])
    assert {r["query"] for r in single.records if r["type"] == "subtask"} <= set(decomposition["single_shot"])
    assert checked.records != single.records and checked.records and single.records
    assert single.details == {}  # the plain config records nothing new and asks once
    assert requests_after == 6 and again.details == checked.details  # a rerun is served from the cache
    assert hooks.describe()["decompose_samples"] == 5 and "decompose_samples" not in plain.describe()


def test_a_later_repeat_draws_other_samples_and_agreeing_samples_do_not_differ(bank_dir):
    from amd.methods.amd.decompose import checked_decomposition

    asked = []

    def student(messages, sampling=None):
        asked.append(sampling)
        return ChatReply(text='["get watchlist stocks", "place buy order"]')

    agreeing = checked_decomposition(student, "Buy shares.", 3, 0.9, run_seed=1)
    assert asked == [None] + [{"temperature": 0.9, "seed": seed} for seed in (2000, 2001, 2002)]
    assert agreeing.differs is False and agreeing.merged == agreeing.single_shot


@pytest.mark.parametrize("options,message", [({"decompose_samples": "0"}, "from 1 to 99"),
                                             ({"decompose_samples": "many"}, "from 1 to 99"),
                                             ({"decompose_samples": "3", "decompose_temperature": "0"}, "> 0"),
                                             ({"fn_gate": "sometimes"}, "always, repeat")])
def test_bad_variant_options_are_named(bank_dir, options, message):
    with pytest.raises(AmdError, match=message):
        hooks_for(bank_dir, "wf_st_fn", options=options)


def test_checked_decomposition_needs_subtasks_retrieved_at_task_start(bank_dir):
    with pytest.raises(AmdError, match="decompose_samples needs subtask memory"):
        hooks_for(bank_dir, "wf_fn", options={"decompose_samples": "3"})
    with pytest.raises(AmdError, match="decompose_samples needs subtask memory"):
        hooks_for(bank_dir, "wf_st", per_turn=True, options={"decompose_samples": "3"})


# ---- gated and compressed function memory (beyond the paper) -------------------------------------------------------

def test_gating_withholds_the_first_error_on_a_function_and_injects_on_its_repeat(bank_dir):
    gated = open_memory(bank_dir, "wf_st_fn_gated", delta=-1.0)
    always = open_memory(bank_dir, "wf_st_fn", delta=-1.0)
    me, other = task("t_new", "Move my report and tell Alice."), task("t_other", "Move a file.")
    assert always.after_error(me, ["mv"]).records  # always-on: a hint on the first error
    gated.task_start(me)
    first = gated.after_error(me, ["mv", "no_such_function"])
    assert first == Injection("", [], {"fn_gate": {"withheld": ["mv"]}},  # no memory for the unknown one: not withheld
                             queries=[{"type": "function", "query": "no_such_function", "found": 0, "best": None}])
    assert gated.after_error(other, ["mv"]).records == []  # another task's errors are its own
    repeat = gated.after_error(me, ["mv", "send_message"])
    assert [r["query"] for r in repeat.records] == ["mv"] and repeat.details == {"fn_gate": {"withheld": ["send_message"]}}
    assert "mv(" in repeat.text
    gated.task_start(me)  # a task that starts again counts from zero
    assert gated.after_error(me, ["mv"]).records == []
    assert gated.describe()["fn_gate"] == "repeat" and "fn_gate" not in always.describe()


def test_gating_counts_each_task_apart_when_tasks_run_at_once(bank_dir):
    from concurrent.futures import ThreadPoolExecutor

    gated = open_memory(bank_dir, "fn_only", delta=-1.0, options={"fn_gate": "repeat"})
    tasks = [task(f"t_{i}", "Move my report.") for i in range(8)]

    def two_errors(me):
        return [bool(gated.after_error(me, ["mv"]).records) for _ in range(2)]

    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(two_errors, tasks)) == [[False, True]] * 8


def test_signature_rendering_is_one_line_per_function(bank_dir):
    code = open_memory(bank_dir, "fn_only", k={"function": 3})
    compact = open_memory(bank_dir, "wf_st_fn_signature", k={"function": 3})
    me = task("t_new", "Move my report and tell Alice.")
    long = code.after_error(me, ["add", "mv"])
    short = compact.after_error(me, ["add", "mv"])
    assert short.records == long.records  # the same entries, rendered differently
    assert len({r["query"] for r in short.records}) == 2 and len(short.records) > 2
    header, *lines = short.text.splitlines()
    assert header.startswith("## Hint: how add, mv was used")
    assert len(lines) == 2 and lines[0].startswith("- add(") and lines[1].startswith("- mv(")
    assert " -> " in lines[0] and len(short.text) < len(long.text)
    assert compact.describe()["representation"]["function"] == "signature"
    with pytest.raises(AmdError, match="bad memory representation"):
        open_memory(bank_dir, "wf", options={"representation": "wf=signature"})
