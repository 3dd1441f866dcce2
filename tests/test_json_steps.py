"""`--prompting json`: every reply one JSON object (a call or the answer), decoded under the task's tool schemas."""

import json
import os
import subprocess
import sys

import pytest
from jsonschema import Draft202012Validator
from scripted_server import ScriptedServer, script

from amd.agent.json_steps import read_step, step_format
from amd.benchmarks.agentdojo import AgentDojo
from amd.core.schema import read_trajectories


@pytest.fixture(scope="module")
def bench():
    return AgentDojo()


def tools_of(bench, task_id):
    episode = bench.start(task_id)
    episode.next_user_message(None)
    return episode.tools


def validator(tools) -> Draft202012Validator:
    schema = step_format(tools)["json_schema"]["schema"]
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def test_a_step_is_one_call_of_a_task_tool_with_its_own_parameters_or_the_answer(bench):
    steps = validator(tools_of(bench, "banking/user_task_0"))
    assert steps.is_valid({"name": "send_money", "arguments": {"recipient": "UK1", "amount": 98.7,
                                                               "subject": "bill", "date": "2022-01-01"}})
    assert steps.is_valid({"name": "get_balance", "arguments": {}})
    assert steps.is_valid({"answer": "You spent 1050."})
    assert not steps.is_valid({"name": "refund_iban", "arguments": {}})  # no such tool
    assert not steps.is_valid({"name": "send_money", "arguments": {"recipient": "UK1", "amount": 98.7,
                                                                   "subject": "bill", "date": "2022-01-01",
                                                                   "recurring": False}})  # no such parameter
    assert not steps.is_valid({"name": "send_money", "arguments": {"recipient": "UK1"}})  # required ones missing
    assert not steps.is_valid({"name": "get_most_recent_transactions", "arguments": {"n": "many"}})
    assert not steps.is_valid([{"name": "get_balance", "arguments": {}}])  # one call per reply, not a list
    assert not steps.is_valid({"answer": "done", "name": "get_balance"})


def test_a_tools_own_definitions_move_to_the_root_and_its_references_follow(bench):
    tools = tools_of(bench, "workspace/user_task_0")
    share = next(t for t in tools if t["function"]["name"] == "share_file")["function"]["parameters"]
    assert "$defs" in share  # the package's schema refers to an enum of its own
    steps = validator(tools)
    permission = next(iter(share["$defs"].values()))["enum"][0]
    assert steps.is_valid({"name": "share_file", "arguments": {"file_id": "0", "email": "a@b.c",
                                                               "permission": permission}})
    assert not steps.is_valid({"name": "share_file", "arguments": {"file_id": "0", "email": "a@b.c",
                                                                   "permission": "owner-of-everything"}})


def test_an_answer_ends_the_turn_with_its_text_and_a_call_is_read_as_a_call():
    assert read_step('{"answer": "It is 1050."}') == ([], "It is 1050.")
    proposals, text = read_step('{"name": "get_balance", "arguments": {}}')
    assert [(p.name, p.arguments) for p in proposals] == [("get_balance", {})]
    assert text == '{"name": "get_balance", "arguments": {}}'
    assert read_step("no json at all") == ([], "no json at all")


def test_a_json_run_sends_the_constraint_not_the_tools_and_scores_the_answer(tmp_path):
    """banking/user_task_1 asks for a total: the answer object's text is what AgentDojo's check reads."""
    replies = script('{"name": "get_most_recent_transactions", "arguments": {"n": 100}}',
                     '{"answer": "You spent 1050 in March 2022."}')
    out = tmp_path / "run.jsonl"
    with ScriptedServer(replies) as server:
        done = subprocess.run(
            [sys.executable, "-m", "amd.cli", "run", "agentdojo", "--agent", f"vllm:scripted@{server.url}",
             "--prompting", "json", "--tasks", "banking/user_task_1", "--out", str(out), "--no-progress"],
            env={**os.environ, "AMD_CACHE_DIR": str(tmp_path / "cache")}, capture_output=True, text=True,
            timeout=300, check=False)
        requests = [r.body for r in server.chat_requests()]
    assert done.returncode == 0, done.stderr[-2000:]
    [record] = read_trajectories(out)
    assert record["success"] is True and record["n_steps"] == 2
    steps = record["turns"][0]["steps"]
    assert [c["name"] for c in steps[0]["calls"]] == ["get_most_recent_transactions"]
    assert steps[1]["model_text"] == "You spent 1050 in March 2022."
    for body in requests:
        assert "tools" not in body  # a native-tool server gets the docs in the prompt and the constraint instead
        schema = body["response_format"]["json_schema"]["schema"]
        assert {choice["properties"]["name"]["const"] for choice in schema["anyOf"][:-1]} >= {"send_money"}
    assert "get_most_recent_transactions" in requests[0]["messages"][0]["content"]
    assert json.loads(requests[1]["messages"][2]["content"])["name"] == "get_most_recent_transactions"
