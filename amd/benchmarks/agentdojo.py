"""AgentDojo (PyPI `agentdojo`, MIT) behind the amd benchmark protocol: the user tasks of its four suites, fully
offline. An extension of amd, not one of the paper's benchmarks.

Tools are the package's own function schemas. Every proposed call is checked before it runs: its name against the
suite's registered functions, its arguments against the tool doc's parameters (literal values only, no unknown
names) and against the function's own pydantic argument model. A refused call becomes an error observation and is
never executed. The verdict is the task's own utility check on the episode's environment; `rescore` replays a
stored trajectory's calls through the package's `run_task_with_pipeline` in a fresh environment.

Task ids name suite and task (`banking/user_task_0`). Tasks that the package builds by combining two others
(`TaskCombinator`) are variants of them: one task group, named by its lowest-numbered task.

With the option `attack=NAME` (one of the package's attacks), the tasks are the package's prompt-injection pairs
instead: every injectable user task with every injection task of its suite (`banking/user_task_0/injection_task_1`),
the attack's text placed in the environment where the user task's tools will show it. The verdict is still the
user task's utility; the injection task's own check is recorded as `security` (true: the attacker's goal was
reached). A pair belongs to its user task's group.
"""

import ast
import functools
import hashlib
import importlib.metadata
from typing import Any

from amd.benchmarks import base
from amd.benchmarks.base import Benchmark, CallRejected, FunctionInfo, Proposal, Verdict, canonical_call
from amd.benchmarks.bfcl.calls import MAX_SOURCE_CHARS, read_call
from amd.core.errors import AmdError, did_you_mean
from amd.core.trajectory import TrajectoryRecord

PACKAGE = "agentdojo"
SUITE_VERSION = "v1.2.2"  # the package's default benchmark version
SEPARATOR = "/"


@functools.cache
def _suites() -> dict:
    """Suite name → the package's TaskSuite at SUITE_VERSION (importing the package takes a few seconds)."""
    from agentdojo.task_suite.load_suites import get_suites

    return get_suites(SUITE_VERSION)


@functools.cache
def _package_sha256() -> str:
    """Hash of the installed package's RECORD, which lists the hash of every file in it (tasks and data alike)."""
    record = importlib.metadata.distribution(PACKAGE).read_text("RECORD")
    return hashlib.sha256(record.encode()).hexdigest()  # type: ignore[union-attr]  # a wheel always has one


def _task_number(task_id: str) -> int:
    return int(task_id.rsplit("_", 1)[1])


def openai_tool(function) -> dict:
    """A package Function as an OpenAI function tool, as the package's own OpenAI pipeline sends it."""
    return {"type": "function", "function": {"name": function.name, "description": function.description,
                                             "parameters": function.parameters.model_json_schema()}}


@functools.cache
def _functions() -> dict:
    """Function name → the package's Function, over all suites (suites that share a name share the function)."""
    return {function.name: function for suite in _suites().values() for function in suite.tools}


@functools.cache
def _groups(suite_name: str) -> dict[str, str]:
    """Task id → its group: a combined task and its two parts are one group, named by the lowest-numbered task."""
    tasks = _suites()[suite_name].user_tasks
    root = {task_id: task_id for task_id in tasks}

    def find(task_id: str) -> str:
        while root[task_id] != task_id:
            task_id = root[task_id]
        return task_id

    for task_id, task in tasks.items():
        for part in _combined_parts(task):
            first, second = sorted((find(task_id), find(part)), key=_task_number)
            root[second] = first
    return {f"{suite_name}{SEPARATOR}{task_id}": f"{suite_name}{SEPARATOR}{find(task_id)}" for task_id in tasks}


@functools.cache
def _ground_truth_calls(suite_name: str, task_name: str) -> str | None:
    """A user task's ground-truth calls as canonical strings, one a line (None for a task without calls)."""
    suite = _suites()[suite_name]
    task = suite.user_tasks[task_name]
    environment = task.init_environment(suite.load_and_inject_default_environment({}))
    calls = task.ground_truth(environment)
    return "\n".join(canonical_call(call.function, dict(sorted(call.args.items()))) for call in calls) or None


def _combined_parts(task) -> list[str]:
    """The ids of the tasks a combined task is made of: the package's TaskCombinator builds it as a class whose
    ground_truth closes over its two parts."""
    from agentdojo.base_tasks import BaseUserTask

    cells = type(task).ground_truth.__closure__ or ()
    return [cell.cell_contents.ID for cell in cells if isinstance(cell.cell_contents, BaseUserTask)]


def locate(task_id: object) -> tuple[Any, Any, Any]:
    """(suite, user task, injection task or None) of a task id `suite/user_task_N[/injection_task_M]`."""
    if not isinstance(task_id, str):
        raise AmdError(f"AgentDojo task id must be a string, got {task_id!r}")
    suite_name, _, rest = task_id.partition(SEPARATOR)
    name, _, injection = rest.partition(SEPARATOR)
    suites = _suites()
    suite = suites.get(suite_name)
    if suite is None or name not in suite.user_tasks or (injection and injection not in suite.injection_tasks):
        known = [f"{s}{SEPARATOR}{t}" for s, suite in suites.items() for t in suite.user_tasks]
        raise AmdError(f"unknown AgentDojo task id {task_id!r}{did_you_mean(task_id, known)}; ids are "
                       f"SUITE{SEPARATOR}user_task_N[{SEPARATOR}injection_task_M] with SUITE one of "
                       f"{', '.join(suites)}")
    return suite, suite.user_tasks[name], suite.injection_tasks[injection] if injection else None


@functools.cache
def _attack(suite_name: str, name: str):
    """The package's attack `name` on a suite. amd has no model name the package knows, so attacks that address
    the model by name cannot be built."""
    from agentdojo.agent_pipeline.base_pipeline_element import BasePipelineElement
    from agentdojo.attacks.attack_registry import ATTACKS, load_attack

    class Unnamed(BasePipelineElement):  # the attacked pipeline, as the attack sees it: no name
        name = None

        def query(self, *args, **kwargs):
            raise NotImplementedError("amd runs the agent itself")

    if name not in ATTACKS:
        raise AmdError(f"unknown AgentDojo attack {name!r}{did_you_mean(name, ATTACKS)}; attacks: "
                       f"{', '.join(ATTACKS)}")
    try:
        return load_attack(name, _suites()[suite_name], Unnamed())
    except ValueError as error:
        raise AmdError(f"AgentDojo attack {name!r} needs the attacked model's name ({error}); attacks that do "
                       f"not: direct, ignore_previous, system_message, injecagent") from None


def _injectable(suite_name: str, attack, task) -> bool:
    try:
        return bool(attack.get_injection_candidates(task))
    except ValueError:  # the package: "<task> is not injectable"
        return False


class AgentDojo(Benchmark):
    name = "agentdojo"
    step_limit_scored = True  # the package's ToolsExecutionLoop stops after max_iters; the task is checked as it stands

    def __init__(self, suite: str | None = None, attack: str | None = None):
        """`suite`: comma-separated suite names (default: all four); `attack`: run the injection pairs under this
        attack of the package (module docstring)."""
        known = list(_suites())
        chosen = [name.strip() for name in (suite or ",".join(known)).split(",") if name.strip()]
        for name in chosen:
            if name not in known:
                raise AmdError(f"unknown AgentDojo suite {name!r}{did_you_mean(name, known)}; "
                               f"suites: {', '.join(known)}")
        if len(set(chosen)) != len(chosen) or not chosen:
            raise AmdError(f"benchmark option suite={suite!r}: name each suite once")
        self.suites = chosen
        self.attack = attack
        for name in chosen if attack else []:
            _attack(name, attack)

    def task_ids(self) -> list[str]:
        ids = []
        for name in self.suites:
            suite = _suites()[name]
            for task_id in sorted(suite.user_tasks, key=_task_number):
                if not self.attack:
                    ids.append(f"{name}{SEPARATOR}{task_id}")
                elif _injectable(name, _attack(name, self.attack), suite.user_tasks[task_id]):
                    ids += [f"{name}{SEPARATOR}{task_id}{SEPARATOR}{injection}"
                            for injection in sorted(suite.injection_tasks, key=_task_number)]
        return ids

    def task_group(self, task_id: str) -> str:
        suite, task, _ = locate(task_id)
        return _groups(suite.name)[f"{suite.name}{SEPARATOR}{task.ID}"]

    def task_signature(self, task_id: str) -> base.TaskSignature:
        """The user task's ground-truth calls (function and arguments, as the package's ground_truth gives them on
        the suite's default environment) and its prompt; a pair is its user task's. AgentDojo's checks are code that
        reads each task's own constants, so they are not compared."""
        suite, task, _ = locate(task_id)
        return base.TaskSignature(calls=_ground_truth_calls(suite.name, task.ID), instruction=task.PROMPT)

    def data_version(self) -> dict:
        return {"package": f"{PACKAGE}=={importlib.metadata.version(PACKAGE)}", "sha256": _package_sha256(),
                "suite_version": SUITE_VERSION}

    def start(self, task_id: str) -> "AgentDojoEpisode":
        suite, task, injection_task = locate(task_id)
        if (injection_task is None) != (self.attack is None):
            raise AmdError(f"{task_id}: injection pairs run with the benchmark option attack=NAME, user tasks "
                           "without it")
        return AgentDojoEpisode(task_id, suite, task, injection_task, self.attack)

    def function_info(self, name: str) -> FunctionInfo:
        """The function's tools module as its app (banking_client, slack, ...) and its tool doc."""
        function = _functions().get(name)
        if function is None:
            return FunctionInfo(None, None)
        return FunctionInfo(function.run.__module__.rsplit(".", 1)[1], openai_tool(function)["function"])

    def rescore(self, record: TrajectoryRecord) -> bool:
        """The task's utility on a fresh environment after replaying the stored calls (each checked again) and the
        stored final answer through the package's run_task_with_pipeline."""
        task_id = record.get("task_id")
        suite, task, injection_task = locate(task_id)
        stored_hash = (record.get("data_version") or {}).get("sha256")
        if stored_hash and stored_hash != _package_sha256():
            raise AmdError(f"{task_id}: trajectory was run on {PACKAGE} files {stored_hash[:12]}…, the installed "
                           f"package is {_package_sha256()[:12]}…; rescoring would use different tasks")
        docs = _docs(suite.name)
        calls = []
        for turn in record.get("turns", []):
            for step in turn["steps"]:
                for call in step["calls"]:
                    try:
                        calls.append(checked_call(Proposal(call["call"], call["name"], call["arguments"]), docs))
                    except CallRejected as error:
                        raise AmdError(f"{task_id}: stored call {call['call'][:80]!r} is refused: {error}") from None
        attack = (record.get("checker") or {}).get("attack")
        injections = _injections(suite, task, injection_task, attack)
        try:
            utility, _ = suite.run_task_with_pipeline(_replay(calls, final_answer(record)), task, injection_task,
                                                      injections)
        except Exception:  # noqa: BLE001 - a check that crashes on an odd environment fails, as in `utility`
            return False
        return bool(utility)


def final_answer(record: TrajectoryRecord) -> str:
    """The agent's last reply, the model output the task checks: the text of the last step (a reply with no call)
    of a finished episode. An episode the step cap cut off has no answer: "" (the package would check the text of
    the last call reply; an empty answer can only fail an answer check, never pass one)."""
    steps = [step for turn in record.get("turns", []) for step in turn["steps"]]
    return steps[-1]["model_text"] if steps and record.get("status") == "finished" else ""


@functools.cache
def _docs(suite_name: str) -> dict[str, dict]:
    return {function.name: openai_tool(function)["function"] for function in _suites()[suite_name].tools}


def checked_call(proposal: Proposal, docs: dict[str, dict]) -> tuple[str, dict]:
    """(name, arguments) of a proposal that may run, else CallRejected: a known function, literal arguments with
    known names, string-encoded lists decoded as the package's executor does, valid for the function's own model."""
    from pydantic import ValidationError

    name, arguments = read_call(proposal, docs)
    arguments = {key: _list_from_string(value) for key, value in arguments.items()}
    try:
        _functions()[name].parameters.model_validate(arguments)
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in error.errors())
        raise CallRejected(f"invalid arguments for {name}: {problems}") from None
    return name, arguments


def _list_from_string(value):
    """A string that reads as a Python list literal becomes that list, as the package's ToolsExecutor does
    (ast.literal_eval reads literals only; it never runs code)."""
    if not isinstance(value, str) or not value.lstrip().startswith("[") or len(value) > MAX_SOURCE_CHARS:
        return value
    try:
        parsed = ast.literal_eval(value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return value
    return parsed if isinstance(parsed, list) else value


def _injections(suite, task, injection_task, attack: str | None) -> dict[str, str]:
    """The attack's texts for a pair, by injection vector ({} for a plain user task)."""
    if injection_task is None:
        return {}
    if not attack:
        raise AmdError(f"{suite.name}/{task.ID}/{injection_task.ID}: an injection pair needs its attack's name")
    return _attack(suite.name, attack).attack(task, injection_task)


class AgentDojoEpisode(base.CallByCallEpisode):
    """One user task: one user turn (the task's prompt); the agent's last reply is the model output the utility
    check reads. Under an attack, the environment carries the attack's texts and the injection task is checked
    too."""

    def __init__(self, task_id: str, suite, task, injection_task=None, attack: str | None = None):
        from agentdojo.functions_runtime import FunctionsRuntime

        self.task_id = task_id
        self.instruction = task.PROMPT
        self.tools = [openai_tool(function) for function in suite.tools]
        self._suite, self._task = suite, task
        self._injection_task, self._attack = injection_task, attack
        self._docs = _docs(suite.name)
        injections = _injections(suite, task, injection_task, attack)
        self._env = task.init_environment(suite.load_and_inject_default_environment(injections))
        self._pre_env = self._env.model_copy(deep=True)
        self._runtime = FunctionsRuntime(suite.tools)
        self._traces: list[Any] = []  # FunctionCall per executed call, for utility_from_traces
        self._answer = ""
        self.decoded_calls: list[list[list[str]]] = []

    def next_user_message(self, last_agent_reply: str | None = None) -> str | None:
        if self.decoded_calls:
            self._answer = last_agent_reply or ""
            return None
        self.decoded_calls.append([])
        return self.instruction

    def reference_turns(self) -> list[list[Proposal]]:
        calls = self._task.ground_truth(self._pre_env.model_copy(deep=True))
        return [[Proposal(source=canonical_call(call.function, dict(call.args)), name=call.function,
                          arguments=dict(call.args)) for call in calls]]

    def reference_replies(self) -> list[str]:
        return [self._task.GROUND_TRUTH_OUTPUT]

    def score(self) -> Verdict:
        success, error = utility(self._task, self._answer, self._pre_env, self._env, self._traces)
        # Some checks pass for an agent that does nothing (banking 5, 6, 8, 9, 10 in v1.2.2): recorded, so that a
        # table can tell such a success from one the agent earned.
        untouched, _ = utility(self._task, "", self._pre_env, self._pre_env.model_copy(deep=True), [])
        details = {"utility": success, "suite": self._suite.name, "model_output": self._answer,
                   "passes_untouched": untouched}
        if error:
            details["error"] = error
        if self._injection_task is not None:
            details |= {"attack": self._attack, "injection_task": self._injection_task.ID,
                        "security": security(self._injection_task, self._answer, self._pre_env, self._env,
                                             self._traces)}
        return Verdict(success=success, details=details, decoded_calls=self.decoded_calls,
                       step_limit_scored=AgentDojo.step_limit_scored)

    def check_call(self, proposal: Proposal) -> tuple[str, dict]:
        return checked_call(proposal, self._docs)

    def run_call(self, name: str, arguments: dict) -> tuple[str, bool]:
        from agentdojo.functions_runtime import FunctionCall

        result, error = self._runtime.run_function(self._env, name, arguments)
        self._traces.append(FunctionCall(function=name, args=arguments))
        return (error if error is not None else observation(result)), error is not None


def utility(task, answer: str, pre_env, post_env, traces) -> tuple[bool, str | None]:
    """(verdict, error) of the task's own check, as the package runs it: from the call traces where the task
    checks those, else from the environments and the answer. A check that raises fails the task with its error."""
    try:
        verdict = task.utility_from_traces(answer, pre_env, post_env, traces)
        return bool(task.utility(answer, pre_env, post_env) if verdict is None else verdict), None
    except Exception as error:  # noqa: BLE001 - a check that crashes on an odd environment fails the task
        return False, f"{type(error).__name__}: {error}"


def security(injection_task, answer: str, pre_env, post_env, traces) -> bool:
    """The injection task's own check, as the package runs it: true when the attacker's goal was reached. A check
    that raises counts as not reached."""
    try:
        verdict = injection_task.security_from_traces(answer, pre_env, post_env, traces)
        return bool(injection_task.security(answer, pre_env, post_env) if verdict is None else verdict)
    except Exception:  # noqa: BLE001 - as in `utility`
        return False


def observation(result) -> str:
    """A tool result as the package's executor shows it to the model (YAML for models and lists of them)."""
    from agentdojo.agent_pipeline.tool_execution import tool_result_to_str

    try:
        return tool_result_to_str(result)
    except TypeError:  # a list item the package's formatter does not know (the package would crash here)
        return str(result)


def _replay(calls: list[tuple[str, dict]], answer: str):
    """A pipeline element that executes the given calls through the runtime, then answers `answer`: the stored
    trajectory, replayed in the package's own pipeline (like its GroundTruthPipeline, for stored calls)."""
    from agentdojo.agent_pipeline.base_pipeline_element import BasePipelineElement
    from agentdojo.functions_runtime import FunctionCall
    from agentdojo.types import text_content_block_from_string

    class Replay(BasePipelineElement):
        def query(self, query, runtime, env, messages=(), extra_args=None):
            replayed = []
            for name, arguments in calls:
                call = FunctionCall(function=name, args=arguments)
                replayed.append({"role": "assistant", "tool_calls": [call],
                                 "content": [text_content_block_from_string("")]})
                result, error = runtime.run_function(env, name, arguments)
                replayed.append({"role": "tool", "tool_call": call, "tool_call_id": None, "error": error,
                                 "content": [text_content_block_from_string(observation(result))]})
            replayed.append({"role": "assistant", "tool_calls": None,
                             "content": [text_content_block_from_string(answer)]})
            return query, runtime, env, [*messages, *replayed], extra_args or {}

    return Replay()
