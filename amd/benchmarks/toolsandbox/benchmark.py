"""ToolSandbox (apple/ToolSandbox @165848b, arXiv 2408.04682) behind the amd benchmark protocol: the paper's third
benchmark, a stateful tool world with a simulated user.

ToolSandbox pins packages that clash with ours (openai 1.17, numpy 1.26, transformers 4.41, ...), so it lives in
its own virtual environment (`make toolsandbox`; `AMD_TOOLSANDBOX_PYTHON` names another interpreter) and runs in
worker processes (`worker.py`, JSON lines over stdin/stdout) that this module starts and always stops:
on close(), as soon as a request to one fails, and, should this process die, by themselves.

A worker plays one scenario with ToolSandbox's own roles and evaluation. Its agent turns come here: every call the
agent proposes is first validated against the scenario's tool schema (a refused call is an error observation and
never reaches ToolSandbox); the results come back as observations. Its user simulator (ToolSandbox's prompt and
few-shot examples) gets each reply from the user model, any model spec (`user_model=SPEC`; the paper's is
GPT-5-mini), through amd.llm and its response cache. The verdict is ToolSandbox's milestone/minefield evaluation;
success is similarity 1.0, as in the paper. An exception inside ToolSandbox that it cannot continue from scores the
task as failed (similarity 0), as ToolSandbox's own CLI does.

Task ids are scenario names. The base set is the 129 scenarios with NO_DISTRACTION_TOOLS; 38 of them use RapidAPI
tools (a paid key, live network), so `scenarios=offline` (the default, 91 scenarios) leaves them out;
`scenarios=rapidapi` runs only them and `scenarios=base` all 129, both with RAPID_API_KEY set.
"""

import functools
import json
import math
import os
import subprocess
import threading
from pathlib import Path

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from amd.benchmarks import base
from amd.benchmarks.base import (
    Benchmark,
    CallRejected,
    Episode,
    ExecutedCall,
    FunctionInfo,
    Proposal,
    StepOutcome,
    Verdict,
    canonical_call,
)
from amd.benchmarks.bfcl.calls import read_call
from amd.benchmarks.parsing import parse_reply
from amd.benchmarks.processes import ConfinedProcess, Confinement, ProcessPool
from amd.core.errors import AmdError, did_you_mean
from amd.core.prompts import load_prompt
from amd.core.spec import finite_float
from amd.core.trajectory import UserCalls

WORKER = Path(__file__).with_name("worker.py")
DEFAULT_PYTHON = Path(__file__).resolve().parents[3] / ".venv-toolsandbox" / "bin" / "python"
PYTHON_VARIABLE = "AMD_TOOLSANDBOX_PYTHON"
SCENARIO_SETS = {"offline": ("offline",), "rapidapi": ("rapidapi",), "base": ("offline", "rapidapi")}
OPTIONS = ("user_model", "scenarios", "user_temperature", "user_max_tokens", "query")
# The memory query (the episode's instruction): the user's opening message (amd's), or the user simulator's hidden
# scenario instruction (the authors' release: its workflow key and decomposition input)
QUERIES = ("opening", "scenario")
# Scenario names end in variant markers: another phrasing (_alt, _implicit), the request over several user turns,
# a tool taken away (_insufficient_information, _no_<tool>), another starting state (_wifi_off, ...). A scenario's
# task group is its name without them, so the leakage protocols keep a request and its variants together.
VARIANT_MARKERS = ("_alt", "_implicit", "_multiple_user_turn", "_insufficient_information", "_no_remove_contact",
                   "_no_search_contacts", "_ambiguous", "_twice", "_low_battery_mode", "_wifi_off", "_cellular_off")
WORKER_EXIT_S = 10


class ToolSandbox(Benchmark):
    name = "toolsandbox"

    def __init__(self, user_model: str | None = None, scenarios: str = "offline", user_temperature="0",
                 user_max_tokens="1024", query: str = "opening", **unknown):
        if unknown:
            raise AmdError(f"benchmark toolsandbox has no option(s) {', '.join(sorted(unknown))}; "
                           f"options: {', '.join(OPTIONS)}")
        if scenarios not in SCENARIO_SETS:
            raise AmdError(f"benchmark toolsandbox: scenarios={scenarios!r}{did_you_mean(scenarios, SCENARIO_SETS)};"
                           f" known: {', '.join(SCENARIO_SETS)}")
        if "rapidapi" in SCENARIO_SETS[scenarios] and not os.environ.get("RAPID_API_KEY"):
            raise AmdError(f"benchmark toolsandbox: scenarios={scenarios} includes the 38 RapidAPI scenarios, which "
                           "need RAPID_API_KEY and network access; scenarios=offline runs the other 91")
        if query not in QUERIES:
            raise AmdError(f"benchmark toolsandbox: query={query!r}; known: {', '.join(QUERIES)}")
        self.scenario_set, self.query = scenarios, query
        self.user_spec = user_model
        self.user_params = {"temperature": _optional(user_temperature, finite_float, "user_temperature"),
                            "max_tokens": _optional(user_max_tokens, int, "user_max_tokens")}
        self._workers = ProcessPool(functools.partial(Worker, *_worker_setup(scenarios)))
        self._lock = threading.Lock()
        self._answers: dict = {}  # the workers' answers to hello and list, asked once
        self._user: UserSimulator | None = None

    def task_ids(self) -> list[str]:
        if not self.user_spec:
            raise AmdError("benchmark toolsandbox needs a user simulator: --benchmark-option user_model=SPEC "
                           "(the paper's: openai:gpt-5-mini; offline: local:qwen2.5-coder-0.5b or a vllm: server)")
        listing = self._ask("list")["scenarios"]
        return [name for part in SCENARIO_SETS[self.scenario_set] for name in listing[part]]

    def task_group(self, task_id: str) -> str:
        return scenario_group(task_id)

    def task_signature(self, task_id: str) -> base.TaskSignature:
        """The scenario's milestones and minefields (ToolSandbox's checks) and the user simulator's instruction, as
        the worker reads them (worker.signature)."""
        found = self._ask("signatures")["signatures"].get(task_id, {})
        return base.TaskSignature(checks=found.get("checks"), instruction=found.get("instruction"))

    def data_version(self) -> dict:
        query = {"query": self.query} if self.query != QUERIES[0] else {}  # the default's runs read as before
        return {**self._ask("hello")["version"], "scenarios": self.scenario_set, **query}

    def function_info(self, name: str) -> FunctionInfo:
        tool = self._ask("hello")["tools"].get(name, {})
        return FunctionInfo(tool.get("app"), tool.get("doc"))

    def start(self, task_id: str) -> "ToolSandboxEpisode":
        known = self.task_ids()
        if task_id not in known:
            raise AmdError(f"unknown ToolSandbox scenario {task_id!r}{did_you_mean(task_id, known)} in the "
                           f"{self.scenario_set} set")
        user = self._user_simulator()
        return ToolSandboxEpisode(task_id, self._workers.take(), user, self._workers.give_back, self.query)

    def close(self) -> None:
        self._workers.close()
        if self._user is not None:
            self._user.model.close()

    def _ask(self, op: str) -> dict:
        with self._lock:
            if op not in self._answers:
                worker = self._workers.take()
                self._answers[op] = worker.request({"op": op})
                self._workers.give_back(worker)
            return self._answers[op]

    def _user_simulator(self) -> "UserSimulator":
        from amd.llm import open_model

        with self._lock:
            if self._user is None:
                model = open_model(self.user_spec, self.user_params)  # type: ignore[arg-type]  # task_ids() checked it
                model.ensure_reachable()
                self._user = UserSimulator(model)
            return self._user


def scenario_group(name: str) -> str:
    """The scenario name without its variant markers (VARIANT_MARKERS), e.g. remove_contact_by_phone for
    remove_contact_by_phone_no_remove_contact_insufficient_information_alt."""
    stripped = True
    while stripped:
        stripped = False
        for marker in VARIANT_MARKERS:
            if name.endswith(marker) and len(name) > len(marker):
                name, stripped = name[: -len(marker)], True
    return name


class ToolSandboxEpisode(Episode):
    def __init__(self, task_id: str, worker: "Worker", user: "UserSimulator", release, query: str = "opening"):
        self.task_id = task_id
        self._worker, self._user, self._release = worker, user, release
        self._ended: str | None = None  # how the conversation ended, once it has
        self._calls_sent = 0
        self._user_calls: UserCalls = {"spec": user.model.spec, "replies": 0, "requests": 0, "prompt": 0, "completion": 0,
                            "cached_prompt": 0}  # what the user simulator took in this task
        self.decoded_calls: list[list[list[str]]] = []  # per turn, per step, the calls ToolSandbox executed
        first = self._request({"op": "start", "scenario": task_id})
        self.tools = first.get("tools", [])  # none when the scenario ended before the agent's first turn
        self.system_message = "\n\n".join(first.get("system", []))  # ToolSandbox's system message to the agent
        self.official_history = {"tool_names": True}  # how ToolSandbox's own OpenAI agent writes its history
        self._opening: str | None = _user_text(first) if self._ended is None else None
        hidden = first.get("scenario_instruction") if query == "scenario" else None
        self.instruction = hidden or self._opening or ""
        self._schema = ToolSchema(self.tools)

    def next_user_message(self, last_agent_reply: str | None) -> str | None:
        text: str | None
        if self._opening is not None:
            text, self._opening = self._opening, None
        elif self._ended is not None:
            return None
        else:
            text = _user_text(self._request({"op": "reply", "text": last_agent_reply or ""}))
            if self._ended is not None:
                return None
        self.decoded_calls.append([])
        return text

    def execute(self, proposals: list[Proposal]) -> StepOutcome:
        outcome = StepOutcome()
        checked = [self._checked(proposal) for proposal in proposals]
        calls = [call for call in checked if isinstance(call, dict)]
        results = self._run(calls) if calls and self._ended is None else {}
        for proposal, call in zip(proposals, checked):
            if isinstance(call, CallRejected):
                base.refuse(outcome, proposal.source, str(call), base.called_name(proposal))
            elif (result := results.get(call["id"])) is None or result["refused"]:
                reason = result["error"] if result else f"not run: the conversation is over ({self._ended})"
                base.refuse(outcome, proposal.source, reason, call["name"])
            else:
                outcome.calls.append(ExecutedCall(call["name"], call["arguments"],
                                                  canonical_call(call["name"], call["arguments"])))
                outcome.observations.append(json.dumps({"error": result["content"]}) if result["error"]
                                            else result["content"])
                if result["error"]:
                    base.mark_failed(outcome, call["name"])
        if outcome.calls:
            self.decoded_calls[-1].append([call.call for call in outcome.calls])
        outcome.finished = self._ended is not None
        return outcome

    def reference_turns(self) -> None:
        return None  # ToolSandbox judges milestones, not one ground-truth call sequence: no oracle

    def score(self) -> Verdict:
        verdict = self._request({"op": "score"})["verdict"]
        self._release(self._worker)
        success = verdict["exception"] is None and math.isclose(verdict["similarity"], 1.0)
        return Verdict(success=success, details={**verdict, "user_model": self._user.model.spec},
                       decoded_calls=self.decoded_calls, user_calls=self._user_calls)

    def _request(self, message: dict) -> dict:
        answer = self._worker.request(message, lambda ask: self._user.answer(ask, self._user_calls))
        if answer.get("event") == "ended":
            self._ended = answer["ended_by"]
        elif answer.get("event") == "failed":
            self._ended = f"exception: {answer['exception']}"
        return answer

    def _run(self, calls: list[dict]) -> dict:
        """Send validated calls to ToolSandbox; their results by call id."""
        event = self._request({"op": "calls", "calls": calls})
        return {message["id"]: message for message in event["messages"] if message["role"] == "tool"}

    def _checked(self, proposal: Proposal) -> dict | CallRejected:
        """The call as {id, name, arguments} once it has passed the tool schema, or why it is refused."""
        try:
            name, arguments = self._schema.check(proposal)
        except CallRejected as error:
            return error
        self._calls_sent += 1
        return {"id": f"call_{self._calls_sent}", "name": name, "arguments": arguments}


class ToolSchema:
    """The scenario's tools as the agent sees them; a proposed call passes only with a known name and arguments
    that are literal JSON values valid under the tool's parameters schema."""

    def __init__(self, tools: list[dict]):
        self.docs = {tool["function"]["name"]: tool["function"] for tool in tools}
        self._validators = {name: Draft202012Validator(_optional_may_be_null(doc.get("parameters", {})))
                            for name, doc in self.docs.items()}

    def check(self, proposal: Proposal) -> tuple[str, dict]:
        """(name, arguments) of a call that may run, or CallRejected with the reason shown to the agent."""
        name, arguments = read_call(proposal, self.docs)
        arguments = _as_json(arguments)
        error = best_match(self._validators[name].iter_errors(arguments))
        if error is not None:
            where = "".join(f"[{part!r}]" for part in error.absolute_path)
            raise CallRejected(f"{name}: arguments{where}: {error.message}")
        return name, arguments


class UserSimulator:
    """The model behind ToolSandbox's user role: any model spec, through amd.llm (so every reply is cached). A model
    without native tool calls gets the tools described in its system prompt and its calls read from its text."""

    def __init__(self, model):
        self.model = model

    def answer(self, ask: dict, usage: UserCalls | None = None) -> dict:
        """The user's reply to ToolSandbox's ask; its replies, requests and tokens are added to `usage`."""
        tools = ask.get("tools") or None
        messages = ask["messages"]
        if tools and not self.model.native_tools:
            messages = _tools_in_prompt(messages, tools)
        reply = self.model.chat(messages, tools)
        if usage is not None:
            counted = reply.usage()
            usage["replies"] += counted["replies"]
            usage["requests"] += counted["requests"]
            usage["prompt"] += counted["prompt"]
            usage["completion"] += counted["completion"]
            usage["cached_prompt"] = usage.get("cached_prompt", 0) + counted["cached_prompt"]
        if reply.error is not None:  # not ToolSandbox's fault: the task is left out and a rerun retries it
            raise AmdError(f"user model {self.model.spec}: {reply.error}")
        offered = {tool["function"]["name"] for tool in tools or []}
        proposals = parse_reply(reply.text, reply.tool_calls) if tools else []
        calls = [{"name": p.name, "arguments": json.dumps(p.arguments)}
                 for p in proposals if p.name in offered and p.arguments is not None]
        return {"reply": {"text": reply.text, "tool_calls": calls}}


class Worker:
    """One worker process, confined (`amd.benchmarks.processes`); one request at a time. A failed request ends the
    process: its state is unknown."""

    def __init__(self, python: Path, box: Confinement):
        self.process = ConfinedProcess([str(python), str(WORKER)], box, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       text=True, encoding="utf-8")
        stdin, stdout = self.process.process.stdin, self.process.process.stdout
        assert stdin is not None and stdout is not None  # opened as pipes just above
        self._stdin, self._stdout = stdin, stdout

    def request(self, message: dict, answer_ask=None) -> dict:
        """Send a request; answer the worker's asks (the user model) until its answer comes."""
        try:
            answer = self._exchange(message)
            while "ask" in answer:
                answer = self._exchange(answer_ask(answer))
            if "error" in answer:
                raise AmdError(f"ToolSandbox worker: {answer['error']}")
            return answer
        except BaseException:
            self.kill()
            raise

    @property
    def alive(self) -> bool:
        return self.process.alive

    def stop(self) -> None:
        """Closing its stdin ends the worker (so does the lifeline, which stop() closes); one that lingers is
        killed."""
        try:
            self._stdin.close()
        except OSError:
            pass
        self.process.stop(WORKER_EXIT_S)

    def kill(self) -> None:
        self.process.stop(0)

    def _exchange(self, message: dict) -> dict:
        try:
            self._stdin.write(json.dumps(message, ensure_ascii=False) + "\n")
            self._stdin.flush()
            line = self._stdout.readline()
        except OSError:
            line = ""
        if not line:
            raise AmdError(f"the ToolSandbox worker exited (code {self.process.process.wait()}); its errors are "
                           "above")
        return json.loads(line)


def _worker_setup(scenarios: str) -> tuple[Path, Confinement]:
    """The workers' Python and what they may see: ToolSandbox's environment, and the network (with the RapidAPI
    key) only for a scenario set that calls RapidAPI."""
    python = _toolsandbox_python()
    online = "rapidapi" in SCENARIO_SETS[scenarios]
    variables = {"TQDM_DISABLE": "1"}  # no progress bar per scenario in our logs
    if online:
        variables["RAPID_API_KEY"] = os.environ["RAPID_API_KEY"]
    return python, Confinement(readable=(python.parents[1], python.resolve().parents[1], WORKER),
                               variables=variables, network=online)


def _toolsandbox_python() -> Path:
    python = Path(os.environ.get(PYTHON_VARIABLE) or DEFAULT_PYTHON)
    if not python.exists():
        raise AmdError(f"ToolSandbox's environment is not installed ({python} is missing): run `make toolsandbox` "
                       f"(from ../shared/vendor/ToolSandbox-165848b.tar.gz or the pinned commit), or set "
                       f"{PYTHON_VARIABLE} to a Python that has tool_sandbox")
    return python


def _optional(value, kind, option: str):
    """An option's value as a number; none/null leaves the setting out of the request."""
    if value is None or str(value).strip().lower() in ("none", "null"):
        return None
    try:
        return kind(value)
    except ValueError:
        what = "a finite float" if kind is finite_float else f"an {kind.__name__}"
        raise AmdError(f"benchmark toolsandbox: {option}={value!r} is not {what} or none") from None


def _optional_may_be_null(schema: dict) -> dict:
    """The parameters schema with null allowed for parameters that are not required: ToolSandbox's tools take
    None for them (the schema drops `Optional`), and ToolSandbox itself checks what else they accept."""
    required = set(schema.get("required", []))
    properties = {name: prop if name in required or "type" not in prop
                  else {**prop, "type": [*_types(prop["type"]), "null"]}
                  for name, prop in schema.get("properties", {}).items()}
    return {**schema, "properties": properties, "additionalProperties": False}


def _types(value) -> list:
    return list(value) if isinstance(value, list) else [value]


def _as_json(arguments: dict) -> dict:
    """Arguments as JSON values (tuples become lists); anything JSON cannot hold is refused."""
    try:
        return json.loads(json.dumps(arguments))
    except (TypeError, ValueError) as error:
        raise CallRejected(f"argument values must be JSON values ({error})") from None


def _user_text(event: dict) -> str:
    return "\n\n".join(message["content"] for message in event["messages"] if message["role"] == "user")


def _tools_in_prompt(messages: list[dict], tools: list[dict]) -> list[dict]:
    """The tools' docs appended to the last system message (ToolSandbox's: the scenario's own user instruction)."""
    docs = json.dumps([tool["function"] for tool in tools], ensure_ascii=False)
    note = load_prompt("user_simulator_tools").format(tool_docs=docs)
    last = max((i for i, message in enumerate(messages) if message["role"] == "system"), default=None)
    if last is None:
        return [{"role": "system", "content": note}, *messages]
    extended = {**messages[last], "content": f"{messages[last]['content']}\n\n{note}"}
    return [*messages[:last], extended, *messages[last + 1:]]
