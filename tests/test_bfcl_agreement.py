"""amd's `--prompting official --benchmark-option harness=official` against bfcl-eval's own multi-turn loop.

Both harnesses talk to one scripted OpenAI-compatible server (a test double) whose reply depends only on the
conversation it is sent: which task (its first user message), which turn, how many steps the turn has taken. The
official side is the package's `BaseHandler.inference_multi_turn_FC` driving its `OpenAICompletionsHandler` (the
generic OpenAI-compatible function-calling handler), scored by its evaluation runner's
`_evaluate_single_multi_turn_entry`; the amd side is `amd run bfcl`. On 25 tasks and eight behaviours (solve, several
calls in one reply, skip a turn, drop a call, loop in the last turn, loop in the first, an undecodable call, an
unknown function) the two send the same requests (messages and tools) and get the same verdicts. The differences
that remain are deliberate and asserted here: tool-call ids (amd numbers them itself, so its response cache does
not depend on ids a server draws at random), sampling fields (amd sends max_tokens and seed, bfcl-eval store=false),
and the observation of a call amd refuses before it runs (an unknown function: amd's refusal, where bfcl-eval
eval()s the call and reports the NameError).
"""

import copy
import json
import sys
import types
import uuid

import pytest
from scripted_server import ScriptedServer, ToolCalls

from amd.analysis.score import recheck
from amd.benchmarks.bfcl.benchmark import _bfcl_ready, _dataset
from amd.benchmarks.bfcl.calls import parse_call
from amd.cli import main

TASKS = [f"multi_turn_base_{i}" for i in range(0, 200, 8)]  # 25 tasks, every class of the set
BEHAVIOURS = ["solve", "parallel", "skip_last_turn", "drop_first_call", "loop_last_turn", "loop_first_turn",
              "undecodable_call", "unknown_function"]
READ_ONLY = {"GorillaFileSystem": "pwd", "MessageAPI": "list_users", "TicketAPI": "ticket_get_login_status",
             "TradingBot": "get_current_time", "TravelAPI": "list_all_airports",
             "TwitterAPI": "posting_get_login_status", "VehicleControlAPI": "check_tire_pressure"}
UNKNOWN = "no_such_function"


def behaviour(task_id: str) -> str:
    return BEHAVIOURS[TASKS.index(task_id) % len(BEHAVIOURS)]


def ground_truth_calls(task_id: str, turn: int) -> list[tuple[str, dict]]:
    data = _dataset()
    docs = {doc["name"]: doc for name in data.entries[task_id]["involved_classes"] for doc in data.class_docs[name]}
    return [parse_call(source, docs) for source in data.ground_truth[task_id][turn]]


def call(name: str, arguments) -> dict:
    return {"name": name, "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments)}


def policy(request: dict):
    """The scripted model: what to answer, from the conversation alone."""
    data = _dataset()
    messages = request["messages"]
    users = [i for i, m in enumerate(messages) if m["role"] == "user"]
    task_id = next(t for t in TASKS if data.entries[t]["question"][0][0]["content"] == messages[users[0]]["content"])
    turn, last_turn = len(users) - 1, len(data.entries[task_id]["question"]) - 1
    done = sum(m["role"] == "assistant" for m in messages[users[-1]:])
    calls = ground_truth_calls(task_id, turn)
    kind = behaviour(task_id)
    if kind == "parallel":
        return ToolCalls([call(*c) for c in calls]) if calls and done == 0 else "Done."
    if kind == "skip_last_turn" and turn == last_turn:
        return "I cannot do that."
    if kind == "drop_first_call" and turn == 0:
        calls = calls[1:]
    if kind == "unknown_function" and turn == 0:
        calls = [(UNKNOWN, {}), *calls]
    if done < len(calls):
        return ToolCalls([call(*calls[done])])
    looping = (kind == "loop_last_turn" and turn == last_turn) or (kind == "loop_first_turn" and turn == 0)
    if looping:
        classes = data.entries[task_id]["involved_classes"]
        return ToolCalls([call(next(READ_ONLY[c] for c in classes if c in READ_ONLY), {})])
    if kind == "undecodable_call" and turn == 0 and done == len(calls):
        return ToolCalls([call(calls[-1][0] if calls else "ls", "{not json")])
    return "Done."


@pytest.fixture(scope="module")
def official_harness(tmp_path_factory):
    """bfcl-eval's handler and evaluation function. Its evaluation runner imports the package's registry of vendor
    handlers (every vendor's SDK: mistralai, anthropic, ...), which the light install lacks and the evaluation of
    one entry never reads; an empty registry stands in for it."""
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv("BFCL_PROJECT_ROOT", str(tmp_path_factory.mktemp("bfcl-root")))
    registry = types.ModuleType("bfcl_eval.constants.model_config")
    registry.MODEL_CONFIG_MAPPING = {}
    if "bfcl_eval.constants.model_config" not in sys.modules:
        monkeypatch.setitem(sys.modules, registry.__name__, registry)
    _bfcl_ready()
    from bfcl_eval import utils as loader
    from bfcl_eval.eval_checker import eval_runner as runner
    from bfcl_eval.model_handler.api_inference import openai_completion as handler_module
    yield handler_module.OpenAICompletionsHandler, runner._evaluate_single_multi_turn_entry, loader
    monkeypatch.undo()


def run_official(official_harness, server, monkeypatch) -> tuple[dict, dict]:
    """Requests per task and verdict per task of bfcl-eval's own loop and evaluation."""
    handler_class, evaluate, loader = official_harness
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    model_name = f"scripted_{uuid.uuid4().hex[:8]}"  # bfcl-eval keeps backend instances in globals by this name
    handler = handler_class(model_name, 0.0, f"{model_name}-FC", True)
    entries = {entry["id"]: entry for entry in loader.load_dataset_entry("multi_turn_base")}
    answers = {entry["id"]: entry["ground_truth"] for entry in loader.load_ground_truth_entry("multi_turn_base")}
    requests, verdicts = {}, {}
    for task_id in TASKS:
        first = len(server.chat_requests())
        result, _ = handler.inference_multi_turn_FC(copy.deepcopy(entries[task_id]), False, True)
        requests[task_id] = [r.body for r in server.chat_requests()[first:]]
        checked = evaluate(handler, task_id, result, answers[task_id], copy.deepcopy(entries[task_id]),
                           model_name, "multi_turn_base")
        verdicts[task_id] = checked["valid"]
    _bfcl_ready()
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils as utils
    for key in [key for key in vars(utils) if model_name in key]:
        delattr(utils, key)
    return requests, verdicts


def run_amd(server, out, *options) -> tuple[dict, dict]:
    first = len(server.chat_requests())
    assert main(["run", "bfcl", "--agent", f"vllm:scripted@{server.url}", "--prompting", "official",
                 "--tasks", ",".join(TASKS), "--out", str(out), "--no-progress", *options]) == 0
    bodies = [r.body for r in server.chat_requests()[first:]]
    records = [json.loads(line) for line in out.read_text().splitlines()]
    requests = {}
    for record in records:  # one task at a time, in order: its requests are the next n_steps
        requests[record["task_id"]], bodies = bodies[:record["n_steps"]], bodies[record["n_steps"]:]
    return requests, {record["task_id"]: record["success"] for record in records}


def conversation(body: dict) -> dict:
    """What the model sees: the messages with tool-call ids numbered in order of appearance (a tool message names
    the latest call of its id: a server may reuse ids across replies), and the tools."""
    latest, count = {}, 0
    messages = []
    for message in copy.deepcopy(body["messages"]):
        for tool_call in message.get("tool_calls") or []:
            latest[tool_call["id"]], count = f"id{count}", count + 1
            tool_call["id"] = latest[tool_call["id"]]
        if "tool_call_id" in message:
            message["tool_call_id"] = latest[message["tool_call_id"]]
        messages.append(message)
    return {"messages": messages, "tools": body.get("tools")}


@pytest.fixture(scope="module")
def both(official_harness, tmp_path_factory):
    monkeypatch = pytest.MonkeyPatch()
    where = tmp_path_factory.mktemp("agreement")
    monkeypatch.setenv("AMD_CACHE_DIR", str(where / "cache"))
    with ScriptedServer(policy) as server:
        official = run_official(official_harness, server, monkeypatch)
        amd = run_amd(server, where / "official.jsonl", "--benchmark-option", "harness=official")
        default = run_amd(server, where / "default.jsonl")
    monkeypatch.undo()
    yield {"official": official, "amd": amd, "default": default, "runs": where}


def test_the_same_verdicts_on_25_tasks_and_both_kinds_occur(both):
    (_, official), (_, amd) = both["official"], both["amd"]
    assert len(official) == len(TASKS) == 25
    assert amd == official
    assert {task for task, valid in official.items() if not valid} == {
        task for task in TASKS if behaviour(task) in ("skip_last_turn", "drop_first_call", "loop_first_turn")}


def test_the_same_requests_except_the_observation_of_a_refused_call(both):
    (official, _), (amd, _) = both["official"], both["amd"]
    for task_id in TASKS:
        sent, expected = [conversation(b) for b in amd[task_id]], [conversation(b) for b in official[task_id]]
        assert len(sent) == len(expected), task_id
        for ours, theirs in zip(sent, expected):
            assert ours["tools"] == theirs["tools"]
            if behaviour(task_id) != "unknown_function":
                assert ours["messages"] == theirs["messages"], task_id
                continue
            differ = [(a, b) for a, b in zip(ours["messages"], theirs["messages"]) if a != b]
            assert len(ours["messages"]) == len(theirs["messages"])
            assert all(a["role"] == "tool" and "rejected call" in a["content"] and
                       b["content"] == f"Error during execution: name '{UNKNOWN}' is not defined" for a, b in differ)


def test_bfcl_eval_allows_twenty_executed_steps_and_the_reply_per_turn(both):
    (official, _), (amd, _) = both["official"], both["amd"]
    loop = next(task for task in TASKS if behaviour(task) == "loop_first_turn")
    in_first_turn = [b for b in official[loop] if sum(m["role"] == "user" for m in b["messages"]) == 1]
    assert len(in_first_turn) == 21 and len(official[loop]) == 21  # then force-quit: no second turn
    assert len(amd[loop]) == 21


def test_amds_default_caps_differ_where_bfcl_eval_scores_a_task_cut_in_its_last_turn(both):
    (_, official), (_, default) = both["official"], both["default"]
    loop_last = {task for task in TASKS if behaviour(task) == "loop_last_turn"}
    assert all(official[task] for task in loop_last)  # the checker passes extra read-only calls
    assert not any(default[task] for task in loop_last)  # amd's default force-quits them as failed
    assert {task for task in TASKS if official[task] != default[task]} >= loop_last


def test_the_sampling_fields_are_the_only_other_part_of_the_body_that_differs(both):
    (official, _), (amd, _) = both["official"], both["amd"]
    theirs, ours = official[TASKS[0]][0], amd[TASKS[0]][0]
    assert set(theirs) - {"messages", "tools"} == {"model", "temperature", "store"}
    assert set(ours) - {"messages", "tools"} == {"model", "temperature", "max_tokens", "seed"}


def test_a_recheck_agrees_with_every_stored_verdict_of_either_loop(both):
    official_run = both["runs"] / "official.jsonl"
    records = [json.loads(line) for line in official_run.read_text().splitlines()]
    cut_and_solved = [r for r in records if r["status"] == "step_limit" and r["success"]]
    assert {r["task_id"] for r in cut_and_solved} == {t for t in TASKS if behaviour(t) == "loop_last_turn"}
    assert all(r["data_version"]["harness"] == "official" for r in records)
    assert recheck(official_run) == [] and recheck(both["runs"] / "default.jsonl") == []
