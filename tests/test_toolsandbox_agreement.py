"""amd's ToolSandbox verdicts against ToolSandbox's own CLI scoring, on the same scripted agent and user replies.

One scripted OpenAI-compatible server plays the agent and the user simulator for both: `amd run toolsandbox` (its
worker, amd's agent loop) and ToolSandbox's own `run_scenario` with its own OpenAI agent and user roles
(tests/toolsandbox_own_cli.py). The scripted agent calls the tool the scenario needs and answers, or answers
without checking; the scripted user ends the conversation after the answer. Every score ToolSandbox computes
(similarity, milestone and minefield similarity, turn count) is the same on both sides, under both of amd's
promptings, and with `--prompting official` amd sends the agent requests ToolSandbox's own agent sends (messages,
tools; tool-call ids aside, which amd numbers itself). Left out on purpose: a call outside a tool's schema, which amd refuses before ToolSandbox sees it (its own roles
would run it), so the two conversations part there (tests/test_toolsandbox.py covers amd's side of it).
"""

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from scripted_server import ScriptedServer, ToolCalls
from test_toolsandbox import (
    BY_MESSAGE,
    END,
    TOOLSANDBOX_PYTHON,
    amd_run,
    is_user_simulator,
    needs_engine,
    records_of,
)

SCENARIOS = ["wifi_off", "cellular_off", "add_contact_with_name_and_phone_number", "search_phone_number_with_name",
             "get_wifi", "get_cellular"]
UNCHECKED = {"Is my wifi on?", "Is my cellular service on?"}  # the agent answers these without a call
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
SCORES = ("similarity", "milestone_similarity", "minefield_similarity", "turn_count")


def scripted(request: dict):
    if is_user_simulator(request):
        return END
    messages = request["messages"]
    first = next(m["content"] for m in messages if m["role"] == "user")
    name, arguments, answer = BY_MESSAGE[first]
    if first in UNCHECKED or messages[-1]["role"] == "tool":
        return answer
    return ToolCalls([{"name": name, "arguments": json.dumps(arguments)}])


def own_scores(server, where: Path) -> dict:
    done = subprocess.run([str(TOOLSANDBOX_PYTHON), str(Path(__file__).with_name("toolsandbox_own_cli.py")),
                           server.url, str(where), *SCENARIOS], capture_output=True, text=True, timeout=600,
                          check=False, env=os.environ | {"OPENAI_API_KEY": "unused"})  # its roles' clients want one
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def agent_requests(received) -> dict:
    """The agent's requests (messages with tool-call ids numbered in order, tools) by their first user message. A
    new contact's id is a fresh uuid4 on every run of ToolSandbox, so uuids read alike."""
    found = {}
    for body in (r.body for r in received if not is_user_simulator(r.body)):
        ids, messages = {}, json.loads(UUID.sub("<uuid>", json.dumps(body["messages"])))
        for message in messages:
            for call in message.get("tool_calls") or []:
                call["id"] = ids.setdefault(call["id"], f"id{len(ids)}")
            if "tool_call_id" in message:
                message["tool_call_id"] = ids[message["tool_call_id"]]
        first = next(m["content"] for m in messages if m["role"] == "user")
        found.setdefault(first, []).append({"messages": messages, "tools": body.get("tools")})
    return found


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    where = tmp_path_factory.mktemp("toolsandbox-agreement")
    with ScriptedServer(scripted) as server:
        theirs = own_scores(server, where / "own")
        requests = {"own": agent_requests(server.chat_requests())}
        ours = {}
        for prompting in ("amd", "official"):
            out = where / f"{prompting}.jsonl"
            first = len(server.chat_requests())
            amd_run(server, out, where / "cache", SCENARIOS, "--prompting", prompting)
            ours[prompting] = records_of(out)
            requests[prompting] = agent_requests(server.chat_requests()[first:])
    return theirs, ours, requests


@needs_engine
def test_toolsandboxs_own_scores_equal_amds_under_both_promptings(both):
    theirs, ours, _ = both
    assert all(result["exception_type"] is None for result in theirs.values())
    assert {name for name, result in theirs.items() if result["similarity"] == 1.0} == {
        name for name in SCENARIOS if name not in ("get_wifi", "get_cellular")}
    for prompting, records in ours.items():
        for name in SCENARIOS:
            checker = records[name]["checker"]
            assert {key: checker[key] for key in SCORES} == {key: theirs[name][key] for key in SCORES}, \
                (prompting, name)
            assert records[name]["success"] == (theirs[name]["similarity"] == 1.0)


@needs_engine
def test_prompting_official_sends_the_requests_toolsandboxs_own_agent_sends(both):
    _, _, requests = both
    assert len(requests["own"]) == len(SCENARIOS)
    assert requests["official"] == requests["own"]
    assert requests["amd"] != requests["own"]  # amd's default prompting adds its own system prompt
