"""The paper's Table 1 baselines (ReasoningBank, MemP, SASM): banks from a run holding successes and failures,
written by a scripted model server or by the rules writer, then a student run with each bank on a real BFCL task
(the student is a scripted model too), plus the repairs and fallbacks of malformed answers and each method's
retrieval: the top-k entries, AveFact's mean cosine, stage gating, and the leakage protocol."""

import json
import logging
import re
from collections import Counter

import numpy as np
import pytest
from replay_model import OBSERVATION_PREFIX, ground_truth_answers
from scripted_server import ScriptedServer
from test_memory_fixtures import all_records, write_jsonl

from amd.agent.hooks import TaskContext
from amd.benchmarks.base import create_benchmark
from amd.cli import main as amd_main
from amd.core.vocabulary import memory_config
from amd.llm.base import ChatReply
from amd.memory.bank import load_bank
from amd.memory.build import build_bank
from amd.memory.embed import get_embedder
from amd.memory.method import open_memory
from amd.methods.memp import method as memp
from amd.methods.reasoningbank import method as reasoningbank
from amd.methods.sasm import method as sasm

EMBEDDER = "hash:256"
FIXTURE_IDS = {record["task_id"] for record in all_records()}
FAILED_ID = "multi_turn_base_904"
STUDENT_TASK = "multi_turn_base_104"
STUDENT_KEYWORDS = ["stock", "price", "trading", "company", "market"]
STUDENT_PLAN = [{"stage": "query", "description": "Look up the stock price of the company"},
                {"stage": "execute", "description": "Place the order for the stock"}]
METHODS = ("reasoningbank", "memp", "sasm")
TYPE_OF = {method: memory_config(method).types[0].name for method in METHODS}
WRITTEN = {"reasoningbank": "items", "memp": "script", "sasm": "experience"}  # the text a writer wrote
BFCL = create_benchmark("bfcl")


# ---- scripted writer and student ----------------------------------------------------------------------------------

def writer_answer(prompt: str) -> str:
    """A well-formed answer to each baseline writer prompt, marked with the run's outcome."""
    if "memory items" in prompt:
        outcome = "success" if "SUCCEEDED" in prompt else "failure"
        return "\n".join(f"# Memory Item {n}\n## Title Lesson {n} from a {outcome}\n## Description When a stock is "
                         f"involved.\n## Content Check the <ID> before acting ({outcome})." for n in (1, 2))
    if "keywords of the task" in prompt:
        return json.dumps({"keywords": ["stock", "watchlist", "order", "file", "message"]})
    if "reusable procedure" in prompt:
        outcome = re.search(r"Outcome of the run: (\w+)", prompt).group(1)
        return "\n".join(f"{n}. Step {n} of a {outcome} script" for n in range(1, 6))
    if "functional subtasks" in prompt:
        last = int(re.search(r"steps 0 to (\d+)", prompt).group(1))
        middle = max(last // 2, 0)
        segments = [{"stage": "query", "description": "Read the data the request needs", "start_step": 0,
                     "end_step": middle}]
        if middle < last:
            segments.append({"stage": "execute", "description": "Make the requested change",
                             "start_step": middle + 1, "end_step": last})
        return json.dumps(segments)
    if "transferable experience" in prompt:
        stage = re.search(r"Stage: (\w+)", prompt).group(1)
        mark, verb = ("✓", "worked") if "succeeded: true" in prompt else ("✗", "went wrong")
        return "\n".join(f"- {mark} What {verb} at {stage}, point {n}" for n in (1, 2, 3))
    raise AssertionError(f"unexpected writer prompt: {prompt[:120]}")


def student_model(task_ids):
    """Replays the ground truth; answers the keyword and stage-plan prompts of the baselines."""
    answers = ground_truth_answers(task_ids)

    def respond(request):
        messages = request["messages"]
        last = messages[-1]["content"]
        if "keywords of the task" in last:
            return json.dumps({"keywords": STUDENT_KEYWORDS})
        if "Plan the subtasks" in last:
            return json.dumps(STUDENT_PLAN)
        if last.startswith(OBSERVATION_PREFIX):
            return "Done."
        return answers[(next(m["content"] for m in messages if m["role"] == "user"), last)]

    return respond


def build_with(tmp_path, method, respond, name="bank"):
    path = write_jsonl(tmp_path / "teacher.jsonl", all_records())
    with ScriptedServer(lambda request: respond(request["messages"][-1]["content"])) as server:
        manifest = build_bank([path], method, f"vllm:writer@{server.url}", EMBEDDER, tmp_path / name)
    return manifest, load_bank(tmp_path / name)


def run_student(tmp_path, bank_dir, method, k):
    out = tmp_path / "student.jsonl"
    with ScriptedServer(student_model([STUDENT_TASK])) as server:
        code = amd_main(["run", "bfcl", "--agent", f"vllm:student@{server.url}", "--tasks", STUDENT_TASK,
                         "--out", str(out), "--memory", str(bank_dir), "--memory-config", method,
                         "--k", f"{memory_config(method).types[0].code}={k}", "--max-retries", "1",
                         "--no-progress"])
        requests = [r.body["messages"] for r in server.chat_requests()]
    assert code == 0
    return json.loads(out.read_text()), requests


def system_prompt(requests) -> str:
    return next(messages[0]["content"] for messages in requests if messages[0]["role"] == "system")


# ---- bank from successes and failures, then a student run -----------------------------------------------------------

def test_reasoningbank_bank_and_student_run(tmp_path):
    manifest, bank = build_with(tmp_path, "reasoningbank", writer_answer)
    assert manifest["outcomes"] == {"success": 4, "failure": 1} and manifest["writer"]["kind"] == "model"
    entries = {e["source_task_id"]: e for e in bank.entries["reasoning"]}
    assert entries[FAILED_ID]["outcome"] == "failure"
    assert [i["title"] for i in entries[FAILED_ID]["items"]] == ["Lesson 1 from a failure", "Lesson 2 from a failure"]
    assert entries["multi_turn_base_902"]["items"][0]["title"] == "Lesson 1 from a success"

    record, requests = run_student(tmp_path, tmp_path / "bank", "reasoningbank", k=5)
    injected, prompt = record["system_memory"], system_prompt(requests)
    assert {r["source_task_id"] for r in injected} == FIXTURE_IDS  # k=5: every entry, the failed run's too
    assert all(r["type"] == "reasoning" and r["query"] == record["instruction"] for r in injected)
    assert [r["similarity"] for r in injected] == sorted((r["similarity"] for r in injected), reverse=True)
    assert "## Memory items from past tasks" in prompt
    assert "# Memory Item 10\n## Title Lesson 2 from a" in prompt  # two items per entry, numbered across entries
    assert "Lesson 1 from a failure" in prompt and "Lesson 1 from a success" in prompt
    assert record["memory"]["method"] == "reasoningbank" and record["memory"]["k"] == {"reasoning": 5}


def test_memp_bank_and_student_run(tmp_path):
    manifest, bank = build_with(tmp_path, "memp", writer_answer)
    assert manifest["outcomes"] == {"success": 4, "failure": 1}
    entries = {e["source_task_id"]: e for e in bank.entries["procedure"]}
    assert entries[FAILED_ID]["success"] is False and "FAILURE script" in entries[FAILED_ID]["script"]
    assert entries["multi_turn_base_902"]["keywords"] == ["stock", "watchlist", "order", "file", "message"]
    assert entries["multi_turn_base_902"]["key"].endswith("stock watchlist order file message")

    record, requests = run_student(tmp_path, tmp_path / "bank", "memp", k=3)
    injected, prompt = record["system_memory"], system_prompt(requests)
    assert any("keywords of the task" in m[-1]["content"] and record["instruction"] in m[-1]["content"]
               for m in requests)  # the student extracted its own keywords
    assert len(injected) == 3 and {r["source_task_id"] for r in injected} <= FIXTURE_IDS
    assert all(r["query"] == ", ".join(STUDENT_KEYWORDS) for r in injected)
    for n, r in enumerate(injected, start=1):
        entry = next(e for e in bank.entries["procedure"] if e["id"] == r["entry_id"])
        label = "SUCCESS" if entry["success"] else "FAILURE"
        assert f"[Memory {n} | {label}] Task type: {entry['task'][:100]}\n{entry['script']}" in prompt


def test_sasm_bank_and_student_run(tmp_path):
    manifest, bank = build_with(tmp_path, "sasm", writer_answer)
    assert manifest["outcomes"] == {"success": 4, "failure": 1} and manifest["stages"][0] == "explore"
    failed = [e for e in bank.entries["stage"] if e["source_task_id"] == FAILED_ID]
    assert [e["stage"] for e in failed] == ["query", "execute"] and all(e["outcome"] == "failure" for e in failed)
    assert failed[1]["experience"].startswith("- ✗ What went wrong at execute")

    record, requests = run_student(tmp_path, tmp_path / "bank", "sasm", k=5)
    injected, prompt = record["system_memory"], system_prompt(requests)
    stages = {e["id"]: e["stage"] for e in bank.entries["stage"]}
    assert [r["query"].split(":")[0] for r in injected] == \
        ["query"] * 5 + ["execute"] * 5  # the student's plan, one stage at a time
    assert all(stages[r["entry_id"]] == r["query"].split(":")[0] for r in injected)  # gated by stage
    assert FAILED_ID in {r["source_task_id"] for r in injected}
    assert "[execute phase]\n- ✗ What went wrong at execute" in prompt
    assert "[query phase]\n- ✓ What worked at query" in prompt and "[explore phase]" not in prompt


# ---- malformed writer answers: repaired, or the rules result with a log line ----------------------------------------

@pytest.mark.parametrize("method", METHODS)
def test_unusable_writer_answers_fall_back_to_the_rules_writer_with_a_log_line(tmp_path, method, caplog):
    with caplog.at_level(logging.WARNING, logger="amd.memory"):
        manifest, bank = build_with(tmp_path, method, lambda prompt: "Sorry, I cannot help with that.")
    rules = build_bank([tmp_path / "teacher.jsonl"], method, "rules", EMBEDDER, tmp_path / "rules")
    assert bank.entries == load_bank(tmp_path / "rules").entries
    assert manifest["audit"]["writer_fallbacks"] > 0 and rules["audit"]["writer_fallbacks"] == 0
    assert any("rule" in r.getMessage() for r in caplog.records if r.name == "amd.memory")


def test_reasoningbank_repairs_fenced_overlong_and_titleless_items(caplog):
    items = "\n".join(f"## Title\n## Description When {n}.\n## Content Do {n}." for n in range(5))
    audit = Counter()
    with caplog.at_level(logging.INFO, logger="amd.memory"):
        repaired = reasoningbank.repair_items(f"Here:\n```markdown\n{items}\n## Title Empty\n```", "t", audit)
    assert [(i["title"], i["content"]) for i in repaired] == [("When 0.", "Do 0."), ("When 1.", "Do 1."),
                                                             ("When 2.", "Do 2.")]
    assert audit["answers_repaired"] == 1 and any("kept the first 3" in r.getMessage() for r in caplog.records)
    assert reasoningbank.repair_items("## Title Only a title", "t", audit) is None


def test_memp_repairs_keyword_and_script_answers(caplog):
    chat_answering = student_answering
    audit = Counter()
    keywords = memp.model_keywords(chat_answering('Sure: {"keywords": ' + json.dumps([f"k{n}" for n in range(14)])
                                                  + "}"), "task", "t", audit)
    assert keywords == [f"k{n}" for n in range(10)] and audit["answers_repaired"] == 1
    with caplog.at_level(logging.WARNING, logger="amd.memory"):
        assert memp.model_keywords(chat_answering("stock, price"), "task", "t") is None
        assert memp.model_keywords(chat_answering('{"keywords": ["<keyword>", "<keyword>"]}'), "task", "t") is None
    assert any("task's own words" in r.getMessage() for r in caplog.records)
    record = all_records()[1]
    long_script = "\n".join(f"Step {n}: do thing {n}" for n in range(1, 21))
    script = memp.model_script(chat_answering(long_script), record, [], audit)
    assert script.splitlines()[0] == "1. do thing 1" and script.splitlines()[-1] == "15. do thing 15"
    assert memp.model_script(chat_answering("Do the thing."), record, [], audit) is None


def test_sasm_repairs_segments_and_marks_bullets(caplog):
    steps = sasm.steps_of(all_records()[0])  # seven steps
    answer = json.dumps([{"stage": "Execute", "description": "<sub-goal and key tools>", "start_step": 3,
                          "end_step": 99},  # the answer form's slot, copied: filled by rule
                         {"stage": "plan", "description": "x", "start_step": 0, "end_step": 1},
                         {"stage": "query", "description": "Look first", "start_step": 0, "end_step": 2},
                         {"stage": "verify", "start_step": "two"}])
    audit = Counter()
    with caplog.at_level(logging.WARNING, logger="amd.memory"):
        segments = sasm.repair_segments(f"```json\n{answer}\n```", BFCL, steps, "t", audit)
    assert [(s["stage"], s["start_step"], s["end_step"]) for s in segments] == [("query", 0, 2), ("execute", 3, 6)]
    assert segments[1]["description"].startswith("Make the requested change with")
    assert audit["answers_repaired"] == 1
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "stage 'plan'" in messages and "malformed segment" in messages
    record = all_records()[3]  # the failed run: an unmarked bullet gets ✗
    chat = student_answering("- Check the name first\n- ✓ List the folder\nnot a bullet")
    bullets = sasm.model_bullets(chat, record, segments[0], steps[:1], audit)
    assert bullets == ["- ✗ Check the name first", "- ✓ List the folder"] and audit["answers_repaired"] == 2


# ---- the rules writer ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("method", METHODS)
def test_rules_banks_are_deterministic_and_labelled_model_free(tmp_path, method):
    path = write_jsonl(tmp_path / "teacher.jsonl", all_records())
    first = build_bank([path], method, "rules", EMBEDDER, tmp_path / "a")
    build_bank([path], method, "rules", EMBEDDER, tmp_path / "b")
    assert load_bank(tmp_path / "a").entries == load_bank(tmp_path / "b").entries
    assert first["writer"]["kind"].startswith("rules (deterministic, model-free")
    assert first["outcomes"] == {"success": 4, "failure": 1} and len(first["used_task_ids"]) == 5
    entries = load_bank(tmp_path / "a").entries[TYPE_OF[method]]
    assert FAILED_ID in {e["source_task_id"] for e in entries}
    written = json.dumps([e[WRITTEN[method]] for e in entries])
    assert "USR003" not in written and "final_report.pdf" not in written and "<ID>" in written  # values typed


def test_rules_writers_describe_the_failure_and_the_stages():
    failed, trading = all_records()[3], all_records()[1]
    items = reasoningbank.bank_entries(failed, BFCL)[0][0]["items"]
    assert items[0]["title"] == "Avoid the failing GorillaFileSystem.rm call"
    script = memp.bank_entries(failed, BFCL)[0][0]["script"]
    assert "FAILED: GorillaFileSystem.rm returned \"rm: cannot remove\"" in script
    segments = sasm.bank_entries(trading, BFCL)[0]
    assert [(s["stage"], s["start_step"], s["end_step"]) for s in segments] == [("query", 0, 1), ("execute", 2, 3)]
    assert "- ✓ Call TradingBot.place_order(order_type=<TEXT>, symbol=<TEXT>, price=<AMOUNT>, amount=<AMOUNT>)" in \
        segments[1]["experience"]
    assert sasm.step_stage(sasm.steps_of(trading)[0], changed_in_turn=True) == "verify"


# ---- retrieval: top-k, AveFact, stage gating, protocols --------------------------------------------------------------

@pytest.fixture(scope="module")
def banks(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("baseline-banks")
    path = write_jsonl(tmp / "teacher.jsonl", all_records())
    for method in METHODS:
        build_bank([path], method, "rules", EMBEDDER, tmp / method)
    return tmp


def student_answering(text):
    return lambda messages: ChatReply(text=text)


@pytest.mark.parametrize("method", METHODS)
def test_self_excluded_never_injects_the_task_own_entries_and_shared_does(banks, method):
    student = student_answering(json.dumps({"keywords": ["buy", "shares", "watchlist"]}) if method == "memp"
                                else json.dumps(STUDENT_PLAN))
    leaks = 0
    for protocol in ("self_excluded", "shared"):
        hooks = open_memory(banks / method, method, protocol=protocol, k=10)
        for record in all_records():
            task = TaskContext(record["task_id"], record["task_id"], record["instruction"], student)
            sources = {r["source_task_id"] for r in hooks.task_start(task).records}
            assert sources, (method, record["task_id"])
            leaks += record["task_id"] in sources
            assert protocol == "shared" or record["task_id"] not in sources
    assert leaks > 0  # the leaky protocol does leak, so the check above can fail


@pytest.mark.parametrize("method", METHODS)
def test_a_sibling_task_is_retrievable_under_task_level_exclusion_and_never_under_group_level(tmp_path, method):
    """Tasks 901 and 902 made variants of one scenario: under self_excluded_task each may see the other's memory,
    under self_excluded neither does; neither ever sees its own."""
    records = all_records()
    for record in records[:2]:
        record["task_group"] = "pair"
    build_bank([write_jsonl(tmp_path / "teacher.jsonl", records)], method, "rules", EMBEDDER, tmp_path / "bank")
    student = student_answering(json.dumps({"keywords": ["buy", "shares", "watchlist"]}) if method == "memp"
                                else json.dumps(STUDENT_PLAN))
    for protocol, sibling_seen in (("self_excluded", False), ("self_excluded_task", True)):
        hooks = open_memory(tmp_path / "bank", method, protocol=protocol, k=10)
        for me, sibling in ((records[0], records[1]), (records[1], records[0])):
            found = hooks.task_start(TaskContext(me["task_id"], "pair", me["instruction"], student)).records
            sources = {r["source_task_id"] for r in found}
            assert me["task_id"] not in sources and (sibling["task_id"] in sources) is sibling_seen, (protocol, me)
            assert ("pair" in {r["source_group"] for r in found}) is sibling_seen


def test_reasoningbank_retrieves_top_k_entries_by_instruction(banks):
    hooks = open_memory(banks / "reasoningbank", "reasoningbank", protocol="shared")
    trading = all_records()[1]
    injected = hooks.task_start(TaskContext("new", "new", trading["instruction"]))
    assert len(injected.records) == 3 and injected.records[0]["source_task_id"] == "multi_turn_base_902"
    assert injected.records[0]["similarity"] == pytest.approx(1.0)
    assert "# Memory Item 1\n## Title Follow the proven call order" in injected.text
    assert hooks.describe()["k"] == {"reasoning": 3}


def test_memp_avefact_score_is_the_mean_keyword_cosine(banks):
    hooks = open_memory(banks / "memp", "memp", protocol="shared")
    keywords = ["watchlist", "stock", "order"]
    injected = hooks.task_start(TaskContext("new", "new", "Buy shares.", student_answering(json.dumps(keywords))))
    embedder, bank = get_embedder(EMBEDDER), load_bank(banks / "memp")
    keyword_vectors = embedder.embed(keywords)
    by_hand = {e["id"]: float(np.mean(keyword_vectors @ embedder.embed_one(e["key"])))
               for e in bank.entries["procedure"]}
    scores = [r["similarity"] for r in injected.records]
    assert scores == [pytest.approx(by_hand[r["entry_id"]], abs=1e-5) for r in injected.records]
    assert len(scores) == 3 and scores == sorted(scores, reverse=True)
    assert min(scores) >= max(v for k, v in by_hand.items() if k not in {r["entry_id"] for r in injected.records})
    assert injected.records[0]["source_task_id"] == "multi_turn_base_902"
    assert injected.records[0]["query"] == "watchlist, stock, order"


def test_memp_without_usable_student_keywords_uses_the_task_words(banks, caplog):
    hooks = open_memory(banks / "memp", "memp", protocol="shared")
    with caplog.at_level(logging.WARNING, logger="amd.memory"):
        injected = hooks.task_start(TaskContext("new", "new", "Buy the watchlist stock.", student_answering("ok")))
    assert injected.records[0]["query"] == "buy, watchlist, stock"
    assert any("task's own words" in r.getMessage() for r in caplog.records)


COPIED_PLAN_FORM = json.dumps([{"stage": "<stage name>", "description": "<what this subtask must do>"}])


@pytest.mark.parametrize("answer", ["I will buy.", COPIED_PLAN_FORM])  # prose, or the answer form copied unfilled
def test_sasm_plan_fallback_queries_every_stage_with_the_instruction(banks, caplog, answer):
    hooks = open_memory(banks / "sasm", "sasm", protocol="shared")
    with caplog.at_level(logging.WARNING, logger="amd.memory"):
        injected = hooks.task_start(TaskContext("new", "new", "Buy shares.", student_answering(answer)))
    assert [r["query"] for r in injected.records] == ["explore: Buy shares.", "authenticate: Buy shares.",
                                                      "query: Buy shares.", "execute: Buy shares."]  # no verify entry
    assert any("stage plan unusable" in r.getMessage() for r in caplog.records)
    no_student = hooks.task_start(TaskContext("new", "new", "Buy shares."))
    assert no_student.records == injected.records


def test_sasm_delta_filters_and_one_entry_per_planned_stage(banks):
    plan = student_answering(json.dumps(STUDENT_PLAN + [{"stage": "query", "description": "second query"}]))
    hooks = open_memory(banks / "sasm", "sasm", protocol="shared")
    records = hooks.task_start(TaskContext("new", "new", "Buy shares.", plan)).records
    assert [r["query"].split(":")[0] for r in records] == ["query", "execute"]  # k=1, first description per stage
    strict = open_memory(banks / "sasm", "sasm", protocol="shared", delta=0.999)
    assert strict.task_start(TaskContext("new", "new", "Buy shares.", plan)).records == []
