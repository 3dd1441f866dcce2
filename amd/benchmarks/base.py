"""The benchmark protocol: every environment sits behind these few methods.

A benchmark lists task ids and starts episodes. An episode hands out user messages one turn at a time, executes
what the agent proposes, and scores itself when done. This fits:
- tool-call worlds (BFCL, AgentDojo): `execute` receives parsed call proposals;
- code-action worlds (AppWorld): a proposal carries `code` instead of a call;
- simulated-user worlds (ToolSandbox): `next_user_message` sees the agent's last reply.
A benchmark also owns what only it knows: its functions' docs and apps, task groups (variants of one scenario,
which the leakage protocols keep together) and re-scoring of stored trajectories. The agent loop
(`amd.agent.loop`) depends only on this module; a new benchmark is a module (or a folder) plus a line in amd/plugins.toml.

An episode says how its agent acts (`action_format`): CALLS (tool calls, the default) or CODE (the agent writes a
Python code block per step, which the environment runs itself; the episode then gives `guide`, what the code can
use and how to finish). An episode's and a benchmark's optional members have their defaults in the protocols below.
"""

import json
import re
from dataclasses import dataclass, field
from typing import Any, Protocol

from amd.core.errors import AmdError
from amd.core.registry import BENCHMARKS
from amd.core.trajectory import TrajectoryRecord, UserCalls

CALLS, CODE = "calls", "code"  # action formats: tool calls, or Python code blocks run by the environment


class CallRejected(Exception):
    """A proposed call that must not run; the message is the reason shown to the model."""


def canonical_call(name: str, kwargs: dict[str, Any]) -> str:
    """`name(k=repr(v), ...)`: keyword arguments in the given order, values as Python literals (the form stored in
    decoded_calls and scored)."""
    return f"{name}({', '.join(f'{key}={value!r}' for key, value in kwargs.items())})"


@dataclass
class Proposal:
    """One action the agent proposes. `source` is what the model wrote; `name`/`arguments` are set when the
    model gave structured JSON or a native tool call, otherwise the environment parses `source` itself.
    `malformed` says why a structured call's arguments cannot be read (a list, a string of code, broken JSON):
    the environment must refuse such a proposal as an error observation and never run it."""

    source: str
    name: str | None = None
    arguments: dict[str, Any] | None = None
    code: str | None = None
    malformed: str | None = None


@dataclass
class ExecutedCall:
    """A call the environment ran: the trajectory's `calls` item."""

    name: str
    arguments: dict[str, Any]
    call: str  # canonical string, the form stored in decoded_calls and scored


@dataclass
class StepOutcome:
    """What one step's execution gave: calls run, proposals refused, one observation per proposal, and whether the
    step had an error (`failing_functions`: the names memory looks up) or ended the episode."""

    calls: list[ExecutedCall] = field(default_factory=list)
    rejected: list[dict[str, Any]] = field(default_factory=list)  # {"text", "reason"}: refused, never executed
    observations: list[str] = field(default_factory=list)
    error: bool = False
    failing_functions: list[str] = field(default_factory=list)  # names whose execution or validation failed
    finished: bool = False  # the environment ended the episode: task complete or conversation closed
    code: str | None = None  # CODE episodes: the block the environment ran (its output is the one observation)


@dataclass
class Verdict:
    """The benchmark's own verdict on a finished episode: the trajectory's `success`, `checker` and
    `decoded_calls`."""

    success: bool
    details: dict[str, Any]
    decoded_calls: list[Any]  # per turn, per step, canonical call strings
    step_limit_scored: bool = False  # see counted_success
    user_calls: UserCalls | None = None  # a simulated user's model: its spec, replies, requests and tokens in the task


def counted_success(checked: bool, status: str, step_limit_scored: bool) -> bool:
    """A task counts as solved when the benchmark's check passes on an episode that finished. A benchmark whose own
    harness checks an episode cut off by its step cap as it stands (AgentDojo's tool loop just stops after
    max_iters) sets step_limit_scored; one whose harness force-quits it as failed (BFCL) does not. A model error
    always fails."""
    return bool(checked) and (status == "finished" or (step_limit_scored and status == "step_limit"))


STRICT_RULE = ("strict: solved, and the agent ended the task itself before any step cap (status finished: every turn "
               "ended by the agent's reply or the environment's end, none cut off by amd's caps or the benchmark's own "
               "conversation limit)")
HARNESS_CAP = "message_limit"  # a checker's `ended_by` when the benchmark's own harness cut the conversation off


def strict_success(record: TrajectoryRecord) -> bool:
    """The stricter verdict beside each benchmark's own, one a looping agent cannot pass (STRICT_RULE): the
    benchmark's verdict is a success, the episode finished before any step cap cut it off, and the benchmark's own
    harness did not end it at its limit (a checker's `ended_by`, HARNESS_CAP: ToolSandbox's message limit). A
    multi-turn task (BFCL, ToolSandbox) passes only if every turn ended by the agent's reply, or by the environment
    ending the task (AppWorld's completion call, ToolSandbox's user simulator), within its cap. Where a harness
    scores an episode cut off by its cap as it stands (AgentDojo, AppWorld's paper harness, BFCL's official loop in
    its last turn) its own verdict may be a success while this one is not. It reads only what every record holds,
    so files written before it have it too."""
    return (record["success"] is True and record["status"] == "finished"
            and record["checker"].get("ended_by") != HARNESS_CAP)


@dataclass(frozen=True)
class TaskSignature:
    """What duplicate detection (amd.benchmarks.duplicates) compares between two tasks. Equal `calls` (the task's
    normalised ground-truth calls) or equal `checks` (its normalised success checks) make two tasks duplicates, and
    so does a near-identical `instruction` (its whole request, every user turn). None: the benchmark does not know
    it for this task."""

    calls: str | None = None
    checks: str | None = None
    instruction: str | None = None


@dataclass(frozen=True)
class FunctionInfo:
    """What a benchmark knows of one of its functions (memory building)."""

    app: str | None  # the app (class, service) the function belongs to; None when unknown
    doc: dict[str, Any] | None  # its tool doc as the benchmark ships it
    label: str | None = None  # a short verb phrase for what it does ("list files"), where the benchmark has one


class Episode(Protocol):
    """One task being played. Required: `task_id`, `instruction`, `tools`, `next_user_message`, `execute`, `score`;
    every other member has a default here. Subclass it (`class MyEpisode(Episode)`) to inherit the defaults."""

    task_id: str
    instruction: str  # the retrieval query for memory (BFCL: the first user turn)
    tools: list[dict[str, Any]]  # OpenAI-style function tools: [{"type": "function", "function": {...}}]
    system_message: str = ""  # the benchmark's own instructions to the agent, after the agent's system prompt
    action_format: str = CALLS  # CALLS: tool calls; CODE: a Python code block per step, run by the environment
    guide: str = ""  # CODE: what the code can use and how to finish (in the agent's system prompt)
    first_code_block: bool = False  # CODE: run only a reply's first block
    history_chars: int | None = None  # CODE: trim what is sent to the model to this many characters
    caps_turns: bool = True  # False where the benchmark's harness caps only the task's steps, not each turn's
    official_turns: bool = False  # it follows its official harness's turn loop (amd.agent.loop)
    # Prompting `official`: how its official harness writes the history back: {"null_content": True} for an
    # assistant message's content null beside tool calls, {"tool_names": True} for tool messages that name their
    # function (None: neither).
    official_history: dict[str, bool] | None = None

    @property
    def official_tools(self) -> list[dict[str, Any]] | None:
        """Prompting `official`: the tools exactly as the benchmark's official harness sends them (None: `tools`)."""
        return None

    def next_user_message(self, last_agent_reply: str | None) -> str | None:
        """The next user turn, or None when the conversation is over. Starting a turn ends the previous one."""
        ...

    def execute(self, proposals: list[Proposal]) -> StepOutcome:
        """Validate and run one step's proposals; refused ones become error observations, never code."""
        ...

    def score(self) -> Verdict:
        """The benchmark's own verdict on the finished episode."""
        ...

    def known_turns(self) -> list[str]:
        """Every user turn known before the task starts (BFCL's are all scripted; a simulated user's are not): what a
        decomposition of the whole task reads (amd.agent.hooks.TaskContext.turns)."""
        return [self.instruction]

    def reference_turns(self) -> list[list[Proposal]] | None:
        """Ground-truth actions per turn (for the oracle teacher), or None where the benchmark has none."""
        return None

    def reference_replies(self) -> list[str] | None:
        """The ground-truth final answer per turn, where the benchmark checks the agent's answer text (the oracle
        replies with it; None: the oracle says "Done.")."""
        return None

    def close(self) -> None:
        """Free what the episode holds (called once it is scored, or when it fails)."""
        return


class Benchmark(Protocol):
    """A set of tasks and how to play them. Required: `name`, `task_ids`, `data_version`, `start`; the rest has
    defaults here: every task is its own group, no task signature (so no duplicates found), a dotted call name `app.function` names its app, re-scoring is not
    offered, any machine can run it and there is nothing to stop. Subclass it to inherit the defaults. A benchmark
    is created with its options as keyword arguments (`amd run --benchmark-option KEY=VALUE`, text values)."""

    name: str
    step_limit_scored: bool = False  # its harness checks an episode cut off by the step cap as it stands

    def task_ids(self) -> list[str]:
        """Every task id, in the benchmark's fixed order."""
        ...

    def data_version(self) -> dict[str, Any]:
        """`{"package": "name==version", "sha256": "<data file hash>", ...}`: the trajectory's `data_version`."""
        ...

    def start(self, task_id: str) -> Episode:
        """A fresh episode of one task."""
        ...

    def task_group(self, task_id: str) -> str:
        """The scenario a task is a variant of. The leakage protocols exclude and split whole exclusion groups: these
        scenarios, joined where tasks are duplicates by their `task_signature`s (amd.benchmarks.duplicates)."""
        return task_id

    def task_signature(self, task_id: str) -> TaskSignature:
        """The task's normalised ground truth and instruction, for duplicate detection. The default knows neither:
        then only the benchmark's own task groups are kept together."""
        return TaskSignature()

    def function_info(self, name: str) -> FunctionInfo:
        """App, tool doc and label of a function the agent called (memory building)."""
        app, dot, _ = name.partition(".")
        return FunctionInfo(app if dot else None, None)

    def rescore(self, record: TrajectoryRecord) -> bool:
        """The benchmark's own verdict on a stored trajectory, computed again from what it stores."""
        raise AmdError(f"benchmark {self.name} cannot re-score stored trajectories")

    def record_step_limit_scored(self, record: TrajectoryRecord) -> bool:
        """`step_limit_scored` for a stored record (a benchmark whose harness option changes it says so here)."""
        return self.step_limit_scored

    def check_runnable(self) -> None:
        """Raise AmdError, naming what is missing, when this machine cannot run its tasks (before a run's first)."""
        return

    def close(self) -> None:
        """Stop what the benchmark started (worker processes, servers); called when a run or build is done."""
        return


class CallByCallEpisode(Episode):
    """`execute` for a tool-call episode that runs a step's proposals one at a time: `check_call(proposal)` reads a
    proposal into (name, arguments), raising CallRejected for one it refuses, and `run_call(name, arguments)` runs
    it, returning (observation, failed). `decoded_calls` holds the executed calls as canonical strings, per turn, per
    step: the subclass creates it empty (in `__init__`) and its `next_user_message` appends an empty list for each
    turn it starts; `execute` (here) appends each step's calls to the current turn's list; `score` returns it in the
    `Verdict`."""

    decoded_calls: list[list[list[str]]]

    def execute(self, proposals: list[Proposal]) -> StepOutcome:
        if not self.decoded_calls:
            raise AmdError(f"{self.task_id}: execute() called before the first user turn was taken")
        outcome = StepOutcome()
        for proposal in proposals:
            try:
                name, arguments = self.check_call(proposal)
            except CallRejected as error:
                refuse(outcome, proposal.source, str(error), called_name(proposal))
                continue
            outcome.calls.append(ExecutedCall(name=name, arguments=arguments, call=canonical_call(name, arguments)))
            observation, failed = self.run_call(name, arguments)
            outcome.observations.append(observation)
            if failed:
                mark_failed(outcome, name)
        if outcome.calls:
            self.decoded_calls[-1].append([call.call for call in outcome.calls])
        return outcome

    def check_call(self, proposal: Proposal) -> tuple[str, dict[str, Any]]:
        raise NotImplementedError

    def run_call(self, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        raise NotImplementedError


def refuse(outcome: StepOutcome, text: str, reason: str, name: str | None) -> None:
    """A proposal refused before it ran: recorded with its reason, shown to the agent as an error observation, and
    the function it seems to call counted as failing."""
    outcome.rejected.append({"text": text, "reason": reason})
    outcome.observations.append(json.dumps({"error": f"rejected call: {reason}"}))
    mark_failed(outcome, name)


def mark_failed(outcome: StepOutcome, name: str | None) -> None:
    """The step has an error; `name`, where known, is among its failing functions (once)."""
    outcome.error = True
    if name and name not in outcome.failing_functions:
        outcome.failing_functions.append(name)


def called_name(proposal: Proposal) -> str | None:
    """The function a refused proposal seems to call, for bookkeeping only: its structured name, else the first
    word of its text before a parenthesis."""
    if isinstance(proposal.name, str):
        return proposal.name
    head = re.split(r"[(\s]", (proposal.source or "").strip(), maxsplit=1)[0]
    return head if head.isidentifier() else None


def create_benchmark(name: str, **options: Any) -> Benchmark:
    """A benchmark object by its registered name (options are the benchmark's own, e.g. a suite)."""
    benchmark: Benchmark = BENCHMARKS.load(name)(**options)
    return benchmark
