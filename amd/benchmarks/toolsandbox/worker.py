"""The ToolSandbox side of amd's ToolSandbox benchmark (`amd.benchmarks.toolsandbox.benchmark` starts it): a worker process
that runs in ToolSandbox's own virtual environment and imports only the standard library and `tool_sandbox`,
never amd.

It plays one scenario at a time with ToolSandbox's own `Scenario.play`, its execution environment and its user
simulator role (its prompt and few-shot examples). Two roles are thin subclasses whose model call goes to the
parent instead of a model: the agent role hands each agent turn to amd's agent loop, the user role asks amd for the
user model's reply. ToolSandbox's own milestone/minefield evaluation gives the verdict.

One JSON object per line on stdin/stdout. Requests:
  {"op": "hello"}                          → {"version": {...}, "tools": {name: {"app", "doc"}}}
  {"op": "list"}                           → {"scenarios": {"offline": [...], "rapidapi": [...]}} (base scenarios)
  {"op": "signatures"}                     → {"signatures": {NAME: {"checks", "instruction"}}} (base scenarios)
  {"op": "start", "scenario": NAME}        → the first event
  {"op": "reply", "text": ...}             → the next event (the agent answered the user)
  {"op": "calls", "calls": [{"id", "name", "arguments"}]}   → the next event (the agent called tools)
  {"op": "score"}                          → {"verdict": {...}} (also mid-scenario: play stops there)
Events: {"event": "agent_turn", "messages": [...], "tools": [...], "system": [...]} (the first one also with
"scenario_instruction": the user simulator's hidden instruction), {"event": "ended", "messages",
"ended_by"} (the user ended it, or the message limit) or {"event": "failed", "messages", "exception"} (ToolSandbox
raised), where a message is {"role": "user", "content"} or {"role": "tool", "id", "content", "error", "refused"}.
While playing, the worker may ask {"ask": "user_model", "messages": [...], "tools": [...] | null} and reads
{"reply": {"text", "tool_calls": [{"name", "arguments"}]}}. A bad request is answered {"error": ...}.
Run as `python worker.py` with AMD_LIFELINE_FD naming a pipe that amd holds the write end of. The
worker exits when its stdin closes or that pipe ends (amd is gone), whatever it is doing.
"""

import hashlib
import json
import os
import random
import sys
import threading
import traceback
from importlib.metadata import version
from inspect import getmodule
from pathlib import Path
from typing import Any

import tool_sandbox
import tool_sandbox.tools
from openai import NOT_GIVEN
from openai.types.chat import ChatCompletion
from tool_sandbox.common.execution_context import (
    DatabaseNamespace,
    RoleType,
    ScenarioCategories,
    get_current_context,
)
from tool_sandbox.common.tool_conversion import convert_to_openai_tool
from tool_sandbox.common.tool_discovery import ToolBackend, find_tools_by_module
from tool_sandbox.roles.execution_environment import ExecutionEnvironment
from tool_sandbox.roles.openai_api_agent import OpenAIAPIAgent
from tool_sandbox.roles.openai_api_user import OpenAIAPIUser
from tool_sandbox.scenarios import named_scenarios
from tool_sandbox.scenarios.user_simulator_few_shot_examples import USER_INSTRUCTION

SCENARIO_SEED = 42  # ToolSandbox's CLI seeds `random` with 42 before building scenarios (tool order in allow lists)
RAPID_API_MODULE = "tool_sandbox.tools.rapid_api_search_tools"  # tools that call RapidAPI over the network


def _module_name(tool: object) -> str:
    """The dotted name of the module that defines a tool."""
    module = getmodule(tool)
    return module.__name__ if module is not None else ""


def signature(scenario: Any) -> dict:
    """What duplicate detection compares (amd.benchmarks.duplicates): the scenario's milestones and minefields (each
    snapshot constraint's database, similarity function, reference milestone and target rows, and the DAG's edges)
    as one JSON text, and the user simulator's instruction (the system message to the user, ToolSandbox's common
    preamble left out: the last such message, the ones before it are the few-shot examples)."""
    from tool_sandbox.scenarios.user_simulator_few_shot_examples import USER_INSTRUCTION

    def matcher(found: Any) -> dict:
        milestones = [[{"database": constraint.database_namespace.name,
                        "similarity": getattr(constraint.snapshot_constraint, "__name__", ""),
                        "reference": constraint.reference_milestone_node_index,
                        "target": None if constraint.target_dataframe is None
                        else constraint.target_dataframe.to_dicts()}
                       for constraint in milestone.snapshot_constraints] for milestone in found.milestones]
        return {"milestones": milestones, "edges": sorted(map(list, found.milestone_dag.edges))}

    evaluation = scenario.evaluation
    checks = json.dumps({"milestones": matcher(evaluation.milestone_matcher),
                         "minefields": matcher(evaluation.minefield_matcher)}, sort_keys=True, default=str)
    messages = scenario.starting_context.get_database(DatabaseNamespace.SANDBOX, get_all_history_snapshots=True)
    told = [row["content"] for row in messages.to_dicts()
            if row["sender"] == RoleType.SYSTEM and row["recipient"] == RoleType.USER]
    instruction = told[-1].removeprefix(USER_INSTRUCTION).strip() if told else None  # before it: few-shot examples
    return {"checks": checks, "instruction": instruction}


class StopPlay(Exception):
    """amd asked for the verdict while the scenario was still being played (a step cap, a model error)."""


class Channel:
    def __init__(self, reader, writer):
        self.reader, self.writer = reader, writer

    def send(self, message: dict) -> None:
        self.writer.write(json.dumps(message, ensure_ascii=False) + "\n")
        self.writer.flush()

    def receive(self) -> dict:
        line = self.reader.readline()
        if not line:  # the parent closed our stdin or is gone
            raise SystemExit(0)
        return json.loads(line)

    def exchange(self, message: dict) -> dict:
        self.send(message)
        return self.receive()


def completion(text: str | None, calls: list[dict], id_prefix: str) -> ChatCompletion:
    """An OpenAI chat completion holding amd's answer, the shape ToolSandbox's OpenAI roles read."""
    tool_calls = [{"id": call.get("id") or f"{id_prefix}_{index}", "type": "function",
                   "function": {"name": call["name"], "arguments": call["arguments"]}}
                  for index, call in enumerate(calls)]
    message = {"role": "assistant", "content": text or "", "tool_calls": tool_calls or None}
    return ChatCompletion.model_validate({
        "id": "amd", "object": "chat.completion", "created": 0, "model": "amd",
        "choices": [{"index": 0, "finish_reason": "tool_calls" if tool_calls else "stop", "message": message}]})


class RemoteAgent(OpenAIAPIAgent):
    """ToolSandbox's OpenAI agent role, whose model is amd's agent loop on the other side of the channel."""

    model_name = "amd-agent"

    def __init__(self, channel: Channel):  # no OpenAI client: no request leaves this process
        self.channel = channel
        self.reported = 0  # agent-visible messages already sent to amd
        self.refused: list[dict] = []  # calls ToolSandbox refused in the last step, as tool messages
        self.last_calls: list[dict] = []  # the calls amd sent for the current step
        self.answered = False  # amd answered the current step (ToolSandbox acts on the answer after this)

    def respond(self, ending_index=None) -> None:
        """A step whose calls ToolSandbox refuses (e.g. an unknown tool) adds no message; amd's agent gets the error
        as the calls' observations and acts again."""
        while True:
            self.answered = False
            try:
                return super().respond(ending_index=ending_index)
            except StopPlay:
                raise
            except Exception as error:
                if not (self.answered and self.last_calls):
                    raise
                self.refused = [{"role": "tool", "id": call["id"], "content": f"{type(error).__name__}: {error}",
                                 "error": f"{type(error).__name__}: {error}", "refused": True}
                                for call in self.last_calls]

    def model_inference(self, openai_messages, openai_tools) -> ChatCompletion:
        first = {"scenario_instruction": scenario_instruction(self.get_messages())} if self.reported == 0 else {}
        event = {"event": "agent_turn", **first, "messages": self.refused + self.unreported(),
                 "tools": [] if openai_tools is NOT_GIVEN else list(openai_tools),
                 "system": [m["content"] for m in openai_messages if m["role"] == "system"]}
        self.refused = []
        command = self.channel.exchange(event)
        if command.get("op") == "score":
            raise StopPlay()
        self.last_calls = command.get("calls", []) if command.get("op") == "calls" else []
        self.answered = True
        if command.get("op") == "calls":
            return completion(None, [{**call, "arguments": json.dumps(call["arguments"])} for call in self.last_calls],
                              "agent_call")
        if command.get("op") == "reply":
            return completion(command.get("text") or "", [], "agent_call")
        raise ValueError(f"expected a reply, calls or score from amd, got {command!r}")

    def unreported(self) -> list[dict]:
        """User messages and tool results for the agent that amd has not seen yet."""
        visible = self.filter_messages(self.get_messages())
        new, self.reported = visible[self.reported:], len(visible)
        return [as_event_message(message) for message in new if message.recipient == RoleType.AGENT
                and message.sender in (RoleType.USER, RoleType.EXECUTION_ENVIRONMENT)]


def scenario_instruction(messages) -> str | None:
    """What the scenario tells the user simulator to do: its last system message to the user role (the earlier ones
    are the simulator's few-shot examples), less ToolSandbox's role-play preamble that every scenario shares."""
    told = [message.content for message in messages
            if message.sender == RoleType.SYSTEM and message.recipient == RoleType.USER]
    if not told:
        return None
    text, preamble = told[-1].strip(), USER_INSTRUCTION.strip()
    return text.partition(preamble)[2].strip() if preamble in text else text


def as_event_message(message) -> dict:
    if message.sender == RoleType.USER:
        return {"role": "user", "content": message.content}
    return {"role": "tool", "id": message.openai_tool_call_id, "content": message.content,
            "error": message.tool_call_exception, "refused": False}


class RemoteUser(OpenAIAPIUser):
    """ToolSandbox's user simulator role (its prompt, few-shot examples and `end_conversation` tool); the model
    reply comes from amd, which calls the user model through its own model layer and cache."""

    model_name = "amd-user"

    def __init__(self, channel: Channel):  # no OpenAI client: no request leaves this process
        self.channel = channel

    def model_inference(self, openai_messages, openai_tools) -> ChatCompletion:
        tools = None if openai_tools is NOT_GIVEN else list(openai_tools)
        answer = self.channel.exchange({"ask": "user_model", "messages": openai_messages, "tools": tools})
        if "reply" not in answer:
            raise RuntimeError(f"the user model gave no reply: {answer.get('error')}")
        return completion(answer["reply"]["text"], answer["reply"]["tool_calls"], "user_call")


class Worker:
    def __init__(self, channel: Channel):
        self.channel = channel
        self.tools = find_tools_by_module(tool_sandbox.tools, preferred_tool_backend=ToolBackend.DEFAULT)
        self.scenarios: dict[str, Any] | None = None
        self.scenario: Any = None
        self.outcome: str | None = None  # how the scenario being played ended: "user", "message_limit", "stopped", "exception"
        self.exception: str | None = None

    def serve(self) -> None:
        while True:
            request = self.channel.receive()
            try:
                answer = self.handle(request)
            except Exception as error:  # noqa: BLE001 - a bad request must not end the worker
                answer = {"error": f"{type(error).__name__}: {error}"}
            self.channel.send(answer)

    def handle(self, request: dict) -> dict:
        op = request.get("op")
        if op == "hello":
            return {"version": self.version(), "tools": self.catalog()}
        if op == "list":
            return {"scenarios": self.base_scenarios()}
        if op == "signatures":
            return {"signatures": {name: signature(scenario) for name, scenario in self.load_scenarios().items()}}
        if op == "start":
            return self.play(request["scenario"])
        if op == "score":
            return {"verdict": self.verdict()}
        raise ValueError(f"unknown or misplaced request {request!r}")

    def version(self) -> dict:
        """The installed tool_sandbox package and a sha256 over its source files (scenarios, tools, evaluation)."""
        root = Path(tool_sandbox.__file__).parent
        digest = hashlib.sha256()
        for path in sorted(root.rglob("*.py")):
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
        return {"package": f"tool_sandbox=={version('tool_sandbox')}", "sha256": digest.hexdigest()}

    def catalog(self) -> dict:
        return {name: {"app": _module_name(tool).rsplit(".", 1)[-1],
                       "doc": convert_to_openai_tool(tool)["function"]}
                for name, tool in self.tools.items()}

    def load_scenarios(self) -> dict[str, Any]:
        if self.scenarios is None:
            random.seed(SCENARIO_SEED)
            self.scenarios = {name: scenario for name, scenario in
                              named_scenarios(preferred_tool_backend=ToolBackend.DEFAULT).items()
                              if ScenarioCategories.NO_DISTRACTION_TOOLS in scenario.categories}
        return self.scenarios

    def base_scenarios(self) -> dict:
        rapid = {name for name, tool in self.tools.items() if _module_name(tool) == RAPID_API_MODULE}
        sets: dict[str, list[str]] = {"offline": [], "rapidapi": []}
        for name, scenario in self.load_scenarios().items():
            online = rapid & set(scenario.starting_context.tool_allow_list or [])
            sets["rapidapi" if online else "offline"].append(name)
        return sets

    def play(self, name: str) -> dict:
        """Play the scenario until it ends; the first agent turn answers this request, later ones the agent's
        replies and calls. The last event says how the conversation ended."""
        scenarios = self.load_scenarios()
        if name not in scenarios:
            raise KeyError(f"no base scenario {name!r}")
        self.scenario, self.exception = scenarios[name], None
        agent = RemoteAgent(self.channel)
        roles = {RoleType.AGENT: agent, RoleType.USER: RemoteUser(self.channel),
                 RoleType.EXECUTION_ENVIRONMENT: ExecutionEnvironment()}
        try:
            self.scenario.play(roles=roles, scenario_name=name)
            self.outcome = "message_limit" if conversation_active() else "user"
            event = {"event": "ended", "ended_by": self.outcome}
        except StopPlay:
            self.outcome = "stopped"
            return {"verdict": self.verdict()}
        except Exception as error:  # noqa: BLE001 - ToolSandbox could not go on: a scored failure, as its CLI does
            self.outcome, self.exception = "exception", "".join(traceback.format_exception_only(error)).strip()
            event = {"event": "failed", "exception": self.exception}
        answer = self.channel.exchange({**event, "messages": agent.refused + agent.unreported()})
        while answer.get("op") != "score":  # the conversation is over: nothing is left to do but score it
            answer = self.channel.exchange({"error": f"the scenario is over, got {answer!r}"})
        return {"verdict": self.verdict()}

    def verdict(self) -> dict:
        """ToolSandbox's evaluation of the scenario played last (its CLI's fields); an exception scores 0, as there."""
        if self.scenario is None:
            raise ValueError("no scenario was started")
        scenario, self.scenario = self.scenario, None
        result = self.evaluate(scenario) if self.exception is None else None
        if result is None:
            return {"similarity": 0.0, "milestone_similarity": 0.0, "minefield_similarity": 0.0,
                    "turn_count": scenario.max_messages, "milestone_mapping": {}, "minefield_mapping": {},
                    "ended_by": self.outcome, "exception": self.exception}
        return {"similarity": result.similarity, "milestone_similarity": result.milestone_similarity,
                "minefield_similarity": result.minefield_similarity, "turn_count": result.turn_count,
                "milestone_mapping": {str(k): list(v) for k, v in result.milestone_mapping.items()},
                "minefield_mapping": {str(k): list(v) for k, v in result.minefield_mapping.items()},
                "ended_by": self.outcome, "exception": None}

    def evaluate(self, scenario):
        try:
            return scenario.evaluation.evaluate(execution_context=get_current_context(),
                                                max_turn_count=scenario.max_messages)
        except Exception as error:  # noqa: BLE001 - an evaluation that raises scores 0
            self.outcome, self.exception = "exception", "".join(traceback.format_exception_only(error)).strip()
            return None


def conversation_active() -> bool:
    sandbox = get_current_context().get_database(DatabaseNamespace.SANDBOX)
    return bool(sandbox["conversation_active"][-1])


def exit_with_parent() -> None:
    """End this process as soon as the process that started it is gone (killed, crashed), whatever it is doing;
    also when it died while this one was still importing ToolSandbox."""

    def watch():
        os.read(int(os.environ["AMD_LIFELINE_FD"]), 1)  # blocks until amd closes its end
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def main() -> None:
    exit_with_parent()
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # whatever ToolSandbox prints goes to stderr, not the protocol
    Worker(Channel(sys.stdin, protocol)).serve()


if __name__ == "__main__":
    main()
