"""ToolSandbox end to end: the real engine in its own environment (`make toolsandbox`), a scripted OpenAI-compatible
server on 127.0.0.1 playing both the agent and the user simulator, and ToolSandbox's own evaluation as the verdict;
plus the parts that need no engine (task groups, the call schema, options, a user model without native tools)."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from scripted_server import ScriptedServer, ToolCalls

from amd.benchmarks.base import CallRejected, Proposal
from amd.benchmarks.toolsandbox.benchmark import (
    DEFAULT_PYTHON,
    PYTHON_VARIABLE,
    ToolSchema,
    UserSimulator,
    Worker,
    _worker_setup,
    scenario_group,
)
from amd.cli import main
from amd.llm.client import ChatModel, resolve_params, sdk_client

TOOLSANDBOX_PYTHON = Path(os.environ.get(PYTHON_VARIABLE) or DEFAULT_PYTHON)
needs_engine = pytest.mark.skipif(
    not TOOLSANDBOX_PYTHON.exists(),
    reason=f"ToolSandbox's environment is not installed at {TOOLSANDBOX_PYTHON}: `make toolsandbox` installs it "
           "from ../shared/vendor/ToolSandbox-165848b.tar.gz or the pinned commit (`make test` does where it can)")
USER_SIMULATOR_MARK = "role play as a user"  # ToolSandbox's user simulator prompt says so
END = ToolCalls([{"name": "end_conversation", "arguments": "{}"}])

# scenario → (its first user message, the agent's call, the agent's answer to the user), all as the milestones want
CORRECT = {
    "wifi_off": ("Turn off wifi", "set_wifi_status", {"on": False}, "Wifi is turned off"),
    "get_wifi": ("Is my wifi on?", "get_wifi_status", {}, "Wifi is on"),
    "cellular_off": ("Turn off cellular", "set_cellular_service_status", {"on": False},
                     "Cellular service is turned off"),
    "add_contact_with_name_and_phone_number": (
        "Add Stephen Sondheim to my contact, his phone_number is +19876543210", "add_contact",
        {"name": "Stephen Sondheim", "phone_number": "+19876543210"}, "Stephen Sondheim has been added to your contact"),
    "search_phone_number_with_name": ("What is Homer S's phone number?", "search_contacts", {"name": "Homer S"},
                                      "I found Homer S's phone number: +10000000000"),
}
WRONG = "get_cellular"  # the agent answers without ever checking the setting
FIRST_TRY_REFUSED = "cellular_off"  # the agent first sends "off" for a boolean: refused, then the right call
BY_MESSAGE = {message: (name, arguments, answer) for message, name, arguments, answer in CORRECT.values()}
BY_MESSAGE["Is my cellular service on?"] = (None, None, "Cellular service is on")


def is_user_simulator(request: dict) -> bool:
    return any(USER_SIMULATOR_MARK in (m.get("content") or "") for m in request["messages"] if m["role"] == "system")


def two_roles(request: dict):
    """The user simulator ends the conversation after the agent's answer; the agent calls, then answers."""
    if is_user_simulator(request):
        return END
    messages = request["messages"]
    name, arguments, answer = BY_MESSAGE[next(m["content"] for m in messages if m["role"] == "user")]
    if name is None or (messages[-1]["role"] == "tool" and "rejected call" not in messages[-1]["content"]):
        return answer
    if name == CORRECT[FIRST_TRY_REFUSED][1] and messages[-1]["role"] == "user":
        arguments = {"on": "off"}
    return ToolCalls([{"name": name, "arguments": json.dumps(arguments)}])


def amd_run(server: ScriptedServer, out: Path, cache: Path, tasks: list[str], *extra, background=False):
    spec = f"vllm:scripted@{server.url}"
    argv = [sys.executable, "-m", "amd.cli", "run", "toolsandbox", "--agent", spec, "--user-model", spec, "--tasks", ",".join(tasks), "--out", str(out), "--no-progress", *extra]
    env = {**os.environ, "AMD_CACHE_DIR": str(cache)}
    if background:
        return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def records_of(path: Path) -> dict:
    return {record["task_id"]: record for record in map(json.loads, path.read_text().splitlines())}


@pytest.fixture(scope="module")
def scripted(tmp_path_factory):
    """One run of six offline base scenarios; the server stays up for the tests that look at its requests."""
    where = tmp_path_factory.mktemp("toolsandbox")
    with ScriptedServer(two_roles) as server:
        started = time.monotonic()
        amd_run(server, where / "run.jsonl", where / "cache", [*CORRECT, WRONG])
        yield {"where": where, "server": server, "records": records_of(where / "run.jsonl"),
               "seconds": time.monotonic() - started}


@needs_engine
def test_scripted_runs_get_toolsandbox_verdicts(scripted):
    records = scripted["records"]
    assert set(records) == {*CORRECT, WRONG}
    for task_id in CORRECT:
        checker = records[task_id]["checker"]
        assert records[task_id]["success"] and checker["similarity"] == 1.0, (task_id, checker)
        assert checker["milestone_similarity"] == 1.0 and checker["exception"] is None
        assert checker["ended_by"] == "user" and checker["turn_count"] > 0 and checker["milestone_mapping"]
    wrong = records[WRONG]
    assert not wrong["success"] and wrong["checker"]["similarity"] < 1.0 and wrong["checker"]["exception"] is None
    assert records["add_contact_with_name_and_phone_number"]["decoded_calls"] == [
        [["add_contact(name='Stephen Sondheim', phone_number='+19876543210')"]]]


@needs_engine
def test_a_call_outside_the_schema_is_refused_and_never_runs(scripted):
    steps = records_of(scripted["where"] / "run.jsonl")[FIRST_TRY_REFUSED]["turns"][0]["steps"]
    assert steps[0]["rejected"] and "is not of type 'boolean'" in steps[0]["rejected"][0]["reason"]
    assert steps[0]["error"] and not steps[0]["calls"] and "rejected call" in steps[0]["observations"][0]
    assert steps[1]["calls"][0]["call"] == "set_cellular_service_status(on=False)"
    # ToolSandbox never saw the refused call: the run still meets every milestone
    assert scripted["records"][FIRST_TRY_REFUSED]["checker"]["similarity"] == 1.0


@needs_engine
def test_the_user_model_plays_toolsandbox_user_and_a_rerun_makes_no_request(scripted):
    server, where = scripted["server"], scripted["where"]
    requests = server.chat_requests()
    to_user = [r.body for r in requests if is_user_simulator(r.body)]
    assert len(to_user) == len(CORRECT) + 1  # one answer from the user model per scenario: it ended each one
    assert all([tool["function"]["name"] for tool in body["tools"]] == ["end_conversation"] for body in to_user)
    to_agent = [r.body for r in requests if not is_user_simulator(r.body)]
    assert all("Ask for clarification if a user request is ambiguous" in body["messages"][0]["content"]
               for body in to_agent)  # ToolSandbox's system message reaches the agent
    amd_run(server, where / "rerun.jsonl", where / "cache", [*CORRECT, WRONG])
    new = [r.body for r in server.chat_requests()[len(requests):]]
    assert not [body for body in new if is_user_simulator(body)]  # every user-model reply came from the cache
    # An agent request is new only where ToolSandbox put a fresh value in an observation: add_contact's new uuid4
    assert len(new) == 1 and re.fullmatch(r"'[0-9a-f-]{36}'", new[0]["messages"][-1]["content"])
    rerun = records_of(where / "rerun.jsonl")
    assert {t: r["success"] for t, r in rerun.items()} == {t: r["success"] for t, r in scripted["records"].items()}
    # each task records what its user simulator took: one reply here, its tokens again when it came from the cache
    first = {task: record["user_calls"] for task, record in scripted["records"].items()}
    assert sum(calls["requests"] for calls in first.values()) == len(to_user)
    assert all(calls["spec"] == f"vllm:scripted@{server.url}" and calls["replies"] == 1 and calls["prompt"] > 0
               for calls in first.values())
    assert {task: record["user_calls"] for task, record in rerun.items()} == {
        task: calls | {"requests": 0} for task, calls in first.items()}


@needs_engine
def test_memory_from_toolsandbox_trajectories_has_all_three_types(scripted, capsys):
    bank = scripted["where"] / "bank"
    assert main(["memory", "build", "--trajectories", str(scripted["where"] / "run.jsonl"), "--writer", "rules",
                 "--embedder", "hash:64", "--out", str(bank)]) == 0
    counts = json.loads((bank / "manifest.json").read_text())["counts"]
    assert counts["workflow"] == len(CORRECT) and counts["subtask"] >= len(CORRECT)
    assert counts["function"] >= len(CORRECT)
    functions = [json.loads(line) for line in (bank / "function.jsonl").read_text().splitlines()]
    wifi = next(entry for entry in functions if entry["name"] == "set_wifi_status")
    assert wifi["app"] == "setting" and wifi["doc"]["parameters"]["required"] == ["on"]


@pytest.fixture(scope="module")
def worker():
    if not TOOLSANDBOX_PYTHON.exists():
        pytest.skip("ToolSandbox's environment is not installed")
    started = Worker(*_worker_setup("offline"))
    yield started
    started.stop()


def ending_user(ask: dict) -> dict:
    return {"reply": {"text": "", "tool_calls": [{"name": "end_conversation", "arguments": "{}"}]}}


@needs_engine
def test_query_scenario_makes_the_hidden_scenario_instruction_the_memory_query(tmp_path):
    """The authors' release keys ToolSandbox's memory by the user simulator's instruction, not the user's opening."""
    with ScriptedServer(two_roles) as server:
        amd_run(server, tmp_path / "s.jsonl", tmp_path / "cache", ["get_wifi"], "--benchmark-option", "query=scenario")
        amd_run(server, tmp_path / "o.jsonl", tmp_path / "cache", ["get_wifi"])
    record, opening = records_of(tmp_path / "s.jsonl")["get_wifi"], records_of(tmp_path / "o.jsonl")["get_wifi"]
    assert record["success"] and record["data_version"]["query"] == "scenario" and "query" not in opening["data_version"]
    assert record["instruction"] == "Check wifi status"  # the scenario's task for the simulated user, its preamble cut
    assert opening["instruction"] == record["turns"][0]["user"] == "Is my wifi on?"


def test_an_exception_inside_toolsandbox_is_an_observation_where_it_can_go_on(worker):
    first = worker.request({"op": "start", "scenario": "wifi_off"}, ending_user)
    assert first["event"] == "agent_turn" and first["messages"] == [{"role": "user", "content": "Turn off wifi"}]
    unknown = {"id": "call_1", "name": "set_bluetooth_status", "arguments": {"on": False}}
    refused = worker.request({"op": "calls", "calls": [unknown]}, ending_user)
    assert refused["event"] == "agent_turn" and refused["messages"][0]["refused"]
    assert "KeyError" in refused["messages"][0]["error"] and "set_bluetooth_status" in refused["messages"][0]["error"]
    right = {"id": "call_2", "name": "set_wifi_status", "arguments": {"on": False}}
    result = worker.request({"op": "calls", "calls": [right]}, ending_user)
    assert result["messages"] == [{"role": "tool", "id": "call_2", "content": "None", "error": None,
                                   "refused": False}]
    ended = worker.request({"op": "reply", "text": "Wifi is turned off"}, ending_user)
    assert ended["event"] == "ended" and ended["ended_by"] == "user"
    verdict = worker.request({"op": "score"})["verdict"]
    assert verdict["similarity"] == 1.0 and verdict["exception"] is None


def test_a_worker_starts_with_a_minimal_environment_and_no_key(monkeypatch):
    if not TOOLSANDBOX_PYTHON.exists():
        pytest.skip("ToolSandbox's environment is not installed")
    canary = "sk-canary-toolsandbox-81c2"
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AWS_SECRET_ACCESS_KEY", "RAPID_API_KEY"):
        monkeypatch.setenv(name, canary)
    started = Worker(*_worker_setup("offline"))
    try:
        assert started.request({"op": "hello"})["version"]
        wrapper = started.process.process.pid
        (pid,) = worker_processes(wrapper) or [wrapper]  # under confinement mode none, no wrapper
        environ = Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0")[:-1]
    finally:
        started.stop()
    assert canary not in "".join(environ)
    assert {entry.split("=", 1)[0] for entry in environ} <= {"PATH", "LANG", "HOME", "TMPDIR", "PWD", "TQDM_DISABLE",
                                                             "AMD_LIFELINE_FD"}


def test_an_exception_toolsandbox_cannot_go_on_from_is_a_scored_failure(worker):
    def user_calls_an_unknown_tool(ask):
        return {"reply": {"text": "", "tool_calls": [{"name": "delete_everything", "arguments": "{}"}]}}

    worker.request({"op": "start", "scenario": "get_wifi"}, ending_user)
    worker.request({"op": "calls", "calls": [{"id": "call_1", "name": "get_wifi_status", "arguments": {}}]},
                   ending_user)
    failed = worker.request({"op": "reply", "text": "Wifi is on"}, user_calls_an_unknown_tool)
    assert failed["event"] == "failed" and "delete_everything" in failed["exception"]
    verdict = worker.request({"op": "score"})["verdict"]
    assert verdict["similarity"] == 0.0 and verdict["ended_by"] == "exception" and "KeyError" in verdict["exception"]
    # the worker goes on with the next scenario
    assert worker.request({"op": "start", "scenario": "get_wifi"}, ending_user)["event"] == "agent_turn"
    assert worker.request({"op": "score"})["verdict"]["ended_by"] == "stopped"


def descendants_of(pid: int) -> list[int]:
    """Every process below pid: a confined worker is a wrapper (bwrap, unshare) with the worker under it."""
    children = [int(child) for task in Path(f"/proc/{pid}/task").iterdir()
                for child in (task / "children").read_text().split()]
    return children + [grandchild for child in children for grandchild in descendants_of(child)]


def worker_processes(pid: int) -> list[int]:
    """The workers themselves below pid, not the wrappers that started them."""
    commands = {child: Path(f"/proc/{child}/cmdline").read_text().split("\0")[:-1] for child in descendants_of(pid)}
    return [child for child, argv in commands.items()
            if argv[-1].endswith("toolsandbox/worker.py") and Path(argv[0]).name not in ("bwrap", "unshare")]


def running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"  # an exited child that nobody has reaped yet is not running


@needs_engine
@pytest.mark.slow
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_killed_run_leaves_no_worker_and_a_rerun_resumes(tmp_path, how):
    def slow_agent(request):
        if not is_user_simulator(request):
            time.sleep(1.0)
        return two_roles(request)

    tasks = ["wifi_off", "get_wifi", "cellular_off", "add_contact_with_name_and_phone_number"]
    out = tmp_path / "run.jsonl"
    with ScriptedServer(slow_agent) as server:  # two tasks in flight: two workers
        process = amd_run(server, out, tmp_path / "cache", tasks, "--concurrency", "2", background=True)
        deadline = time.monotonic() + 300
        while not (out.exists() and out.read_text().count("\n") >= 1):
            assert process.poll() is None and time.monotonic() < deadline, process.stdout.read()
            time.sleep(0.2)
        workers = descendants_of(process.pid)
        assert len(worker_processes(process.pid)) == 2
        process.send_signal(how)
        process.wait(timeout=30)
        gone_by = time.monotonic() + 30  # a worker still importing ToolSandbox ends when the import is done
        while [pid for pid in workers if running(pid)] and time.monotonic() < gone_by:
            time.sleep(0.2)
        assert not [pid for pid in workers if running(pid)], "a ToolSandbox worker outlived its run"
        done = amd_run(server, out, tmp_path / "cache", tasks)
    assert "already done" in done.stderr and not done.stderr.count(" 0 already done")
    assert sorted(records_of(out)) == sorted(tasks) and len(out.read_text().splitlines()) == len(tasks)


def test_task_groups_join_a_scenario_and_its_variants():
    assert scenario_group("remove_contact_by_phone_no_remove_contact_insufficient_information_alt") == \
        "remove_contact_by_phone"
    assert scenario_group("find_days_till_holiday_wifi_off_multiple_user_turn") == "find_days_till_holiday"
    assert scenario_group("search_reminder_with_recency_upcoming_insufficient_information_implicit") == \
        "search_reminder_with_recency_upcoming"
    assert scenario_group("cellular_off") == "cellular_off" and scenario_group("wifi_off") == "wifi_off"
    assert scenario_group("search_message_with_recency_latest") != scenario_group("search_message_with_recency_oldest")


ADD_CONTACT = {"type": "function", "function": {
    "name": "add_contact", "description": "Add a contact.",
    "parameters": {"type": "object", "required": ["name", "phone_number"], "properties": {
        "name": {"type": "string"}, "phone_number": {"type": "string"}, "relationship": {"type": "string"},
        "is_self": {"type": "boolean"}}}}}


@pytest.mark.parametrize("proposal, reason", [
    (Proposal(source="x", name="add_contact", malformed="the arguments are not valid JSON"), "not valid JSON"),
    (Proposal(source="x", name="remove_contact", arguments={}), "unknown function 'remove_contact'"),
    (Proposal(source="x", name="add_contact", arguments={"name": "A"}), "'phone_number' is a required property"),
    (Proposal(source="x", name="add_contact", arguments={"name": "A", "phone_number": 5}), "5 is not of type"),
    (Proposal(source="x", name="add_contact", arguments={"name": "A", "phone_number": "1", "age": 3}),
     "has no parameter 'age'"),
    (Proposal(source="add_contact(name=__import__('os').getcwd(), phone_number='1')"), "must be a literal value"),
])
def test_the_tool_schema_refuses_what_may_not_run(proposal, reason):
    with pytest.raises(CallRejected, match=reason):
        ToolSchema([ADD_CONTACT]).check(proposal)


def test_the_tool_schema_passes_calls_as_json_values():
    schema = ToolSchema([ADD_CONTACT])
    # an optional parameter may be null: ToolSandbox's tools take None for it
    assert schema.check(Proposal(source="x", name="add_contact",
                                 arguments={"name": "A", "phone_number": "1", "relationship": None})) == \
        ("add_contact", {"name": "A", "phone_number": "1", "relationship": None})
    assert schema.check(Proposal(source="add_contact('A', '+1', is_self=True)")) == \
        ("add_contact", {"name": "A", "phone_number": "+1", "is_self": True})


@pytest.mark.parametrize("options, fragment", [
    (["colour=blue"], "has no option(s) colour"),
    (["scenarios=everything"], "scenarios='everything'"),
    (["scenarios=rapidapi"], "RAPID_API_KEY"),
    (["user_temperature=warm"], "user_temperature='warm' is not a finite float"),
    (["query=hidden"], "query='hidden'; known: opening, scenario"),
])
def test_bad_options_fail_in_one_line(options, fragment, monkeypatch, tmp_path, capsys):
    monkeypatch.delenv("RAPID_API_KEY", raising=False)
    argv = ["run", "toolsandbox", "--agent", "openai:x", "--out", str(tmp_path / "o.jsonl")]
    assert main(argv + [item for option in options for item in ("--benchmark-option", option)]) == 2
    assert fragment in capsys.readouterr().err


def test_a_missing_environment_names_the_make_target(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv(PYTHON_VARIABLE, str(tmp_path / "nowhere" / "python"))
    assert main(["run", "toolsandbox", "--agent", "openai:x", "--out", str(tmp_path / "o.jsonl")]) == 2
    assert "make toolsandbox" in capsys.readouterr().err


def test_a_user_model_without_native_tools_reads_its_tool_call_from_text():
    with ScriptedServer(lambda request: 'Thanks! {"name": "end_conversation", "arguments": {}}') as server:
        params = resolve_params({"cache": False})
        model = ChatModel(spec="local:test", model="scripted", identity="scripted-text-only",
                          client=sdk_client(params, api_key="x", base_url=server.url), params=params,
                          native_tools=False)
        tool = {"type": "function", "function": {"name": "end_conversation", "description": "End it.",
                                                 "parameters": {"type": "object", "properties": {}}}}
        messages = [{"role": "system", "content": "example"}, {"role": "system", "content": "You want wifi off."},
                    {"role": "user", "content": "Done, wifi is off."}]
        answer = UserSimulator(model).answer({"messages": messages, "tools": [tool]})
        assert answer["reply"]["tool_calls"] == [{"name": "end_conversation", "arguments": "{}"}]
        sent = server.chat_requests()[-1].body
        assert "tools" not in sent and sent["messages"][0]["content"] == "example"
        assert sent["messages"][1]["content"].startswith("You want wifi off.") and \
            '"end_conversation"' in sent["messages"][1]["content"]
        # with no tool offered (the conversation's first message) the text is only a message
        assert UserSimulator(model).answer({"messages": messages, "tools": None})["reply"]["tool_calls"] == []
        model.close()
