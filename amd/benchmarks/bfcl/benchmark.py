"""BFCL V3 multi-turn base (the `bfcl-eval` package's multi_turn_base set) behind the amd benchmark protocol.

Agent actions run on backend instances this module owns, fresh per episode, after `calls` has validated
them; the package's own executor (which eval()s call text and caches instances in globals) never sees model
text.
Scoring uses the package's official multi-turn checker on our canonical call strings.

Option `harness=official` follows bfcl-eval's own multi-turn loop (`BaseHandler.inference_multi_turn_FC`) instead
of the paper's caps: 20 executed steps and then the closing reply per turn, no task cap, a reply with an
undecodable call ends its turn, and a task force-quit in its last turn is scored by the checker as bfcl-eval's
evaluation does (it fails only the entries that lack turns). With `--prompting official` the tools are sent exactly
as bfcl-eval's OpenAI function-calling handler converts them (`official_tools`).
"""

import copy
import functools
import importlib.metadata
import inspect
import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from amd.benchmarks import base
from amd.benchmarks.base import Benchmark, CallRejected, FunctionInfo, Proposal, Verdict, canonical_call
from amd.benchmarks.bfcl.calls import parse_call, read_call
from amd.core.errors import AmdError, did_you_mean
from amd.core.files import sha256_file
from amd.core.paths import cache_dir
from amd.core.registry import load_target
from amd.core.trajectory import TrajectoryRecord

CATEGORY = "multi_turn_base"
HARNESSES = ("amd", "official")  # option harness: amd's caps (paper's 40-step task cap), or bfcl-eval's own loop
DATA_FILE = "BFCL_v4_multi_turn_base.json"
GORILLA_TO_JSON_SCHEMA = {"dict": "object", "float": "number", "tuple": "array", "any": None}
FUNCTION_LABELS = {  # the file-system commands as verb phrases (subtask labels of the rules writer)
    "ls": "list files", "cd": "change directory", "pwd": "show current directory", "mkdir": "make directory",
    "touch": "create file", "cat": "read file", "grep": "search file contents", "mv": "move file",
    "cp": "copy file", "rm": "remove file", "rmdir": "remove directory", "wc": "count file contents",
    "sort": "sort file", "diff": "compare files", "tail": "read file end", "echo": "write text",
    "du": "measure disk usage", "find": "find files",
}


def _bfcl_ready() -> None:
    """Before bfcl_eval is first imported: its project root (where it writes files) is our cache."""
    os.environ.setdefault("BFCL_PROJECT_ROOT", str(cache_dir("bfcl_project")))


@dataclass(frozen=True)
class _Dataset:
    entries: dict  # task id → test entry
    ground_truth: dict  # task id → [[call string, ...] per turn]
    class_docs: dict  # class name → [Gorilla tool doc, ...]
    version: dict
    groups: dict  # task id → the first task id with the same first user turn (variants of one request)


@functools.cache
def _dataset() -> _Dataset:
    _bfcl_ready()
    import bfcl_eval
    from bfcl_eval.constants import executable_backend_config as config

    data_dir = Path(bfcl_eval.__file__).parent / "data"
    questions = data_dir / DATA_FILE
    answers = data_dir / "possible_answer" / DATA_FILE
    entries = {entry["id"]: entry for entry in _read_jsonl(questions)}
    ground_truth = {entry["id"]: entry["ground_truth"] for entry in _read_jsonl(answers)}
    classes = {name for entry in entries.values() for name in entry["involved_classes"]}
    class_docs = {
        name: _read_jsonl(data_dir / "multi_turn_func_doc" / config.MULTI_TURN_FUNC_DOC_FILE_MAPPING[name])
        for name in sorted(classes)
    }
    version = {
        "package": f"bfcl-eval=={importlib.metadata.version('bfcl-eval')}",
        "sha256": sha256_file(questions),
        "ground_truth_sha256": sha256_file(answers),
        "category": CATEGORY,
    }
    return _Dataset(entries, ground_truth, class_docs, version, _groups_by_first_turn(entries))


@functools.cache
def _functions() -> dict[str, tuple[str, dict]]:
    """function name → (class name, Gorilla tool doc)."""
    return {doc["name"]: (name, doc) for name, docs in _dataset().class_docs.items() for doc in docs}


def _first_turn(entry: dict) -> str:
    return "\n\n".join(message["content"] for message in entry["question"][0])


def _groups_by_first_turn(entries: dict) -> dict:
    """Tasks whose first user turn is identical are one group, named by the first of them."""
    first_of: dict[str, Any] = {}
    for task_id in sorted(entries, key=_task_number):
        first_of.setdefault(_first_turn(entries[task_id]), task_id)
    return {task_id: first_of[_first_turn(entry)] for task_id, entry in entries.items()}


def _normalised_calls(turns: list[list[str]], functions: dict[str, tuple[str, dict]]) -> str:
    """Ground-truth calls, one turn a line: each as canonical_call with its arguments in name order (as written
    where it does not parse)."""
    docs = {name: doc for name, (_, doc) in functions.items()}

    def one(source: str) -> str:
        try:
            name, arguments = parse_call(source, docs)
        except CallRejected:
            return "".join(source.split())
        return canonical_call(name, dict(sorted(arguments.items())))

    return "\n".join("; ".join(one(source) for source in turn) for turn in turns)


def _task_number(task_id: str) -> int:
    return int(task_id.rsplit("_", 1)[1])


class BfclMultiTurn(Benchmark):
    name = "bfcl"

    def __init__(self, harness: str = "amd", **unknown):
        if unknown:
            raise AmdError(f"benchmark bfcl has no option {sorted(unknown)}; options: harness")
        if harness not in HARNESSES:
            raise AmdError(f"benchmark bfcl: harness must be one of {', '.join(HARNESSES)}, got {harness!r}")
        self.official_turns = harness == "official"
        self._data = _dataset()

    def task_ids(self) -> list[str]:
        return sorted(self._data.entries, key=_task_number)

    def task_group(self, task_id: str) -> str:
        return self._data.groups[self._entry(task_id)["id"]]

    def task_signature(self, task_id: str) -> base.TaskSignature:
        """The ground-truth calls of every turn (each read against its tool doc, arguments by name, in name order)
        and every user turn's text."""
        entry = self._entry(task_id)
        turns = ["\n\n".join(message["content"] for message in turn) for turn in entry["question"]]
        return base.TaskSignature(calls=_normalised_calls(self._data.ground_truth[task_id], _functions()),
                                  instruction="\n\n".join(turns))

    def data_version(self) -> dict:
        """The data's version; a run of bfcl-eval's own loop says so (`harness`), the default's records are as
        before."""
        return dict(self._data.version) | ({"harness": "official"} if self.official_turns else {})

    def start(self, task_id: str) -> "BfclEpisode":
        entry = self._entry(task_id)
        docs = {name: self._data.class_docs[name] for name in entry["involved_classes"]}
        return BfclEpisode(entry, self._data.ground_truth[task_id], docs, self.official_turns)

    def function_info(self, name: str) -> FunctionInfo:
        """Class and tool doc of a function (no two classes of the set share a function name)."""
        class_name, doc = _functions().get(name, (None, None))
        return FunctionInfo(class_name, doc, FUNCTION_LABELS.get(name))

    def rescore(self, record: TrajectoryRecord) -> bool:
        """The official checker's verdict on a stored trajectory's decoded_calls."""
        return bool(rescore(record).get("valid"))

    def record_step_limit_scored(self, record: TrajectoryRecord) -> bool:
        """A run of bfcl-eval's own loop scores a task force-quit in its last turn (every turn was reached)."""
        official = (record.get("data_version") or {}).get("harness") == "official"
        return official and len(record.get("turns", [])) == len(self._entry(record["task_id"])["question"])

    def _entry(self, task_id: object) -> dict[str, Any]:
        if not isinstance(task_id, str):
            raise AmdError(f"BFCL task id must be a string, got {task_id!r}")
        if task_id not in self._data.entries:
            raise AmdError(f"unknown BFCL task id {task_id!r}{did_you_mean(task_id, self._data.entries)}; "
                           f"known: {CATEGORY}_0..{CATEGORY}_{len(self._data.entries) - 1}")
        return self._data.entries[task_id]


class BfclEpisode(base.CallByCallEpisode):
    def __init__(self, entry: dict, ground_truth: list[list[str]], class_docs: dict[str, list[dict]],
                 official_turns: bool = False):
        self.task_id = entry["id"]
        self.official_turns = official_turns
        self.official_history = {"null_content": True}  # bfcl-eval's OpenAI handler sends the server's message back
        self._entry = entry
        self._ground_truth = ground_truth
        self._user_turns = ["\n\n".join(message["content"] for message in turn) for turn in entry["question"]]
        self.instruction = self._user_turns[0]
        self.tool_docs = [doc for docs in class_docs.values() for doc in docs]  # raw Gorilla docs
        self.tools = [openai_tool(doc) for doc in self.tool_docs]
        self._docs = {doc["name"]: doc for doc in self.tool_docs}
        self._methods = _fresh_backends(entry, class_docs)
        self._turns_started = 0
        self.decoded_calls: list[list[list[str]]] = []  # per turn, per step, canonical call strings

    def next_user_message(self, last_agent_reply: str | None = None) -> str | None:
        if self._turns_started >= len(self._user_turns):
            return None
        self._turns_started += 1
        self.decoded_calls.append([])
        return self._user_turns[self._turns_started - 1]

    def known_turns(self) -> list[str]:
        return list(self._user_turns)

    def reference_turns(self) -> list[list[Proposal]]:
        turns = []
        for calls in self._ground_truth:
            turn = []
            for source in calls:
                try:
                    name, arguments = parse_call(source, self._docs)
                except CallRejected as error:
                    raise AmdError(f"{self.task_id}: ground-truth call {source!r} does not parse: {error}") \
                        from None
                turn.append(Proposal(source=source, name=name, arguments=arguments))
            turns.append(turn)
        return turns

    @functools.cached_property
    def official_tools(self) -> list[dict[str, Any]]:
        """The tools as bfcl-eval's OpenAI function-calling handler sends them: its own loader's processing of the
        entry (the involved classes' docs, a Python-syntax note on each description) and its own conversion
        (`convert_to_tool`: float as number with format float, untyped as string, the response schema kept)."""
        _bfcl_ready()
        from bfcl_eval import utils as package
        from bfcl_eval.constants import enums
        from bfcl_eval.constants import type_mappings as types
        from bfcl_eval.model_handler import utils as handler_utils
        entry = {"id": self.task_id, "involved_classes": list(self._entry["involved_classes"])}
        entry = package.add_language_specific_hint_to_function_doc(
            package.populate_test_cases_with_predefined_functions([entry]))[0]
        return handler_utils.convert_to_tool(entry["function"], types.GORILLA_TO_OPENAPI,
                                             enums.ModelStyle.OPENAI_COMPLETIONS)

    def score(self) -> Verdict:
        decoded = _padded(self.decoded_calls, len(self._ground_truth))
        details = official_check(self._entry, self._ground_truth, decoded)
        # bfcl-eval's evaluation fails a force-quit entry only when turns are missing; one cut in its last turn is
        # checked as it stands.
        every_turn = self._turns_started == len(self._user_turns)
        return Verdict(success=details.get("valid") is True, details=details, decoded_calls=decoded,
                       step_limit_scored=self.official_turns and every_turn)

    def check_call(self, proposal: Proposal) -> tuple[str, dict]:
        return read_call(proposal, self._docs)

    def run_call(self, name: str, arguments: dict) -> tuple[str, bool]:
        return _run(self._methods[name], copy.deepcopy(arguments))  # backends may mutate args


def official_check(entry: dict, ground_truth: list[list[str]], decoded: list[list[list[str]]]) -> dict:
    """Run bfcl's multi_turn_checker and return its answer, JSON-safe.

    The checker eval()s every string it is given. It only ever receives canonical strings built by
    `canonical_call` from validated literal values (see `calls`): a plain function name and keyword
    arguments whose values are Python literal reprs. Its rewrite of `name(` into `instance.name(` can only add
    identifier characters, also inside string literals, so it cannot turn a literal into code.
    """
    _bfcl_ready()
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_checker as checker
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils as utils
    model_name = f"amd_{uuid.uuid4().hex}"
    try:
        result = checker.multi_turn_checker(decoded, ground_truth, entry, CATEGORY, model_name)
    except Exception as error:  # noqa: BLE001 - a checker crash fails the task instead of the run
        result = {"valid": False, "error_type": "amd:checker_exception",
                  "error_message": f"{type(error).__name__}: {error}"}
    finally:
        cached = vars(utils)
        for key in [key for key in cached if model_name in key]:
            del cached[key]
    return json.loads(json.dumps(result, default=str))


def rescore(record: TrajectoryRecord) -> dict:
    """Re-run the official checker on a stored trajectory's decoded_calls; returns the checker's dict.

    Stored strings come from files and are not trusted: each one is parsed again with the safe parser and
    rebuilt canonically before the checker sees it.
    """
    data = _dataset()
    task_id = record.get("task_id")
    entry = BfclMultiTurn()._entry(task_id)
    stored_hash = (record.get("data_version") or {}).get("sha256")
    if stored_hash and stored_hash != data.version["sha256"]:
        raise AmdError(f"{task_id}: trajectory was run on BFCL data {stored_hash[:12]}…, installed data is "
                       f"{data.version['sha256'][:12]}…; rescoring would compare against different tasks")
    docs = {doc["name"]: doc for name in entry["involved_classes"] for doc in data.class_docs[name]}
    ground_truth = data.ground_truth[task_id]
    stored = record.get("decoded_calls", [])
    if len(stored) > len(ground_truth):
        raise AmdError(f"{task_id}: trajectory has {len(stored)} turns, the task has {len(ground_truth)}")
    decoded = [[[_recanonical(text, docs, task_id) for text in step] for step in turn] for turn in stored]
    return official_check(entry, ground_truth, _padded(decoded, len(ground_truth)))


def openai_tool(doc: dict) -> dict:
    """A Gorilla tool doc as an OpenAI function tool (dict→object, float→number, tuple→array, any→untyped)."""
    parameters = _json_schema(doc.get("parameters", {"type": "dict", "properties": {}}))
    parameters.setdefault("properties", {})
    function = {"name": doc["name"], "description": doc.get("description", ""), "parameters": parameters}
    return {"type": "function", "function": function}


def _json_schema(schema: dict) -> dict:
    converted = {}
    for key, value in schema.items():
        if key == "type":
            mapped = GORILLA_TO_JSON_SCHEMA.get(value, value)
            if mapped is not None:
                converted["type"] = mapped
        elif key == "properties":
            converted["properties"] = {name: _json_schema(sub) for name, sub in value.items()}
        elif key == "items":
            converted["items"] = _json_schema(value)
        else:
            converted[key] = copy.deepcopy(value)
    return converted


def _fresh_backends(entry: dict, class_docs: dict[str, list[dict]]) -> dict:
    """Function name → bound method of a new backend instance loaded with this entry's initial state."""
    _bfcl_ready()
    from bfcl_eval.constants import executable_backend_config as config
    methods = {}
    for class_name, docs in class_docs.items():
        backend_class = load_target(f"{config.CLASS_FILE_PATH_MAPPING[class_name]}:{class_name}")
        instance = backend_class()
        if class_name not in config.STATELESS_CLASSES:
            initial_state = copy.deepcopy(entry["initial_config"].get(class_name, {}))
            instance._load_scenario(initial_state, long_context=False)
        for doc in docs:
            method = getattr(instance, doc["name"], None)
            if not inspect.ismethod(method) or doc["name"].startswith("_"):
                raise AmdError(f"bfcl backend {class_name} lacks the method {doc['name']!r} of its tool doc")
            methods[doc["name"]] = method
    return methods


def _run(method, kwargs: dict) -> tuple[str, bool]:
    """Call a backend method; returns (observation formatted as the package's executor does, failed)."""
    try:
        result = method(**kwargs)
        return _observation(result), isinstance(result, dict) and "error" in result
    except Exception as error:  # noqa: BLE001 - like the package, any backend exception becomes an observation
        return f"Error during execution: {error}", True


def _observation(result) -> str:
    if isinstance(result, str):
        return result
    if isinstance(result, dict):
        try:
            return json.dumps(result)
        except (TypeError, ValueError):  # e.g. an object inside the dict
            pass
    return str(result)


def _recanonical(text: str, docs: dict[str, Any], task_id: object) -> str:
    if not isinstance(text, str):
        raise AmdError(f"{task_id}: stored call must be a string, got {type(text).__name__}")
    try:
        return canonical_call(*parse_call(text, docs))
    except CallRejected as error:
        raise AmdError(f"{task_id}: stored call {text[:80]!r} is refused: {error}") from None


def _padded(decoded: list, n_turns: int) -> list:
    return [list(turn) for turn in decoded] + [[] for _ in range(n_turns - len(decoded))]


def _read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]
