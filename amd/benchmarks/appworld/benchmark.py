"""AppWorld (PyPI `appworld` 0.1.3.post1, Trivedi et al. 2024) behind the amd benchmark protocol: the paper's
headline benchmark, run on its test_normal set (168 tasks).

The agent acts in code (action format CODE): each step's Python block runs in AppWorld's own `execute` (its stateful,
sandboxed interpreter, inside an AppWorld server process, never in amd's). The task ends when the agent calls
`apis.supervisor.complete_task(...)` or after the task's step cap (40 in the paper; one user turn, so no per-turn
cap). The verdict is AppWorld's own evaluation: the task's unit tests over the final database state and the answer.
AppWorld runs in its own virtual environment behind its HTTP server, one per worker, on loopback only
(`server.py`).

Data: AppWorld's release (`appworld download data`), found under --benchmark-option root=PATH or $APPWORLD_ROOT
(the folder that holds data/). amd reads task lists, API docs and ground-truth solutions as plain files; the
server does everything else. Servers run in a root of amd's own cache whose data/ links to the user's,
so AppWorld's outputs (one experiment per episode, removed after it) never land in the user's folder.

Function memory reads the `apis.APP.FUNCTION(...)` calls of each block with `ast` (`api_calls`); nothing is run here.
The paper harness's settings (ACE's: the first code block only, output and history limits, the step cap scored, a
fuller guide) are benchmark options, `harness=paper` for all of them (`harness.py`).
"""

import ast
import functools
import hashlib
import json
import os
import re
import shutil
import uuid
from pathlib import Path

from amd.benchmarks.appworld.harness import DEFAULT_HARNESS, AppWorldHarness, cut_output, harness_from_options
from amd.benchmarks.appworld.harness import OPTIONS as HARNESS_OPTIONS
from amd.benchmarks.appworld.server import MODEL_CODE_RUNNER, VERSION, AppWorldServer, AppWorldVenv
from amd.benchmarks.base import (
    CODE,
    Benchmark,
    Episode,
    ExecutedCall,
    FunctionInfo,
    Proposal,
    StepOutcome,
    TaskSignature,
    Verdict,
)
from amd.benchmarks.processes import ProcessPool, require_confined_files
from amd.core.errors import AmdError, did_you_mean
from amd.core.paths import cache_dir
from amd.core.prompts import load_prompt

DATASET = "test_normal"  # the paper's evaluation set
OPTIONS = ("root", "dataset", *HARNESS_OPTIONS)
FAILED = "Execution failed."  # how AppWorld's execute begins the output of a block that raised
INPUT_LINE = re.compile(r'File "<python-input>", line (\d+)')
API_FAILURE = re.compile(r"^Exception: Response status code is \d+", re.MULTILINE)  # an API call itself failed
SOLUTION = "solution"  # the function of a ground-truth compiled_solution.py: solution(apis, requester)


class AppWorld(Benchmark):
    name = "appworld"

    def __init__(self, root: str | None = None, dataset: str = DATASET, **options):
        unknown = set(options) - set(HARNESS_OPTIONS)
        if unknown:
            raise AmdError(f"benchmark appworld has no option {sorted(unknown)}; options: {', '.join(OPTIONS)}")
        self.harness = harness_from_options(**options)
        self.data = _data_dir(root)
        self.dataset = dataset
        self._ids = _dataset_ids(self.data, dataset)
        self._pool: ProcessPool[AppWorldServer] | None = None
        self._root: Path | None = None

    def task_ids(self) -> list[str]:
        return list(self._ids)

    def task_group(self, task_id: str) -> str:
        """AppWorld's scenario (its generator id): tasks xxxxxxx_1/2/3 are variants of one scenario."""
        return self._known(task_id).split("_")[0]

    def task_signature(self, task_id: str) -> TaskSignature:
        """The ground-truth solution's code read with `ast` (layout, comments and docstrings left out) and the task's
        instruction, as files of AppWorld's data; a task without a solution file has no calls."""
        task = self.data / "tasks" / self._known(task_id)
        solution = task / "ground_truth" / "compiled_solution.py"
        instruction = json.loads((task / "specs.json").read_text()).get("instruction")
        return TaskSignature(calls=normalised_code(solution.read_text()) if solution.exists() else None,
                             instruction=instruction)

    def data_version(self) -> dict:
        harness = self.harness.describe()
        return {"package": f"appworld=={VERSION}", "sha256": _tasks_sha256(self.data, self.dataset, self._ids),
                "dataset": self.dataset, **({"harness": harness} if harness else {})}

    def check_runnable(self) -> None:
        AppWorldVenv().check()
        require_confined_files(MODEL_CODE_RUNNER)

    def start(self, task_id: str) -> "AppWorldEpisode":
        if self._pool is None or self._root is None:
            venv, root = AppWorldVenv(), _run_root(self.data)
            venv.check()
            self._root, self._pool = root, ProcessPool(lambda: AppWorldServer(venv, root))
        return AppWorldEpisode(self._known(task_id), self._pool, self._root, self.data, self.harness)

    def function_info(self, name: str) -> FunctionInfo:
        """`app.function` with the API's doc (parameters and response schemas), as AppWorld's docs give it."""
        app, _, api = name.partition(".")
        return FunctionInfo(app or None, _api_docs(self.data, app).get(api))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()

    def _known(self, task_id: str) -> str:
        if task_id not in self._ids:
            raise AmdError(f"unknown AppWorld task id {task_id!r} in {self.dataset}"
                           f"{did_you_mean(str(task_id), self._ids)}")
        return task_id


class AppWorldEpisode(Episode):
    action_format = CODE
    caps_turns = False  # one user turn; the paper caps the task's steps only

    def __init__(self, task_id: str, pool: ProcessPool[AppWorldServer], root: Path, data: Path,
                 harness: AppWorldHarness = DEFAULT_HARNESS):
        self.task_id = task_id
        self.tools: list[dict] = []  # the agent writes code instead
        self.harness = harness
        self.guide = load_prompt("appworld_guide_paper" if harness.guide == "paper" else "appworld_guide")
        self.first_code_block = harness.code_blocks == "first"  # read by the agent (amd.agent.agents)
        self.history_chars = harness.history_chars or None
        self._data, self._pool, self._root = data, pool, root
        self._experiment = f"amd-{uuid.uuid4().hex}"
        self._server = pool.take()
        try:
            task = self._server.post("/initialize", task_id=task_id, experiment_name=self._experiment)
        except BaseException:
            self.close()
            raise
        self.instruction = task["instruction"]
        self._user_message = load_prompt("appworld_task").format(instruction=self.instruction, **task["supervisor"])
        self._asked = False
        self._blocks: list[str] = []  # every block AppWorld ran, in order

    def next_user_message(self, last_agent_reply: str | None = None) -> str | None:
        if self._asked:
            return None
        self._asked = True
        return self._user_message

    def execute(self, proposals: list[Proposal]) -> StepOutcome:
        outcome = StepOutcome()
        for proposal in proposals:
            if proposal.malformed or proposal.code is None:
                reason = proposal.malformed or "not a code block"
                outcome.rejected.append({"text": proposal.source, "reason": reason})
                outcome.observations.append(f"Refused, nothing ran: {reason}.")
                outcome.error = True
            else:
                self._run(proposal.code, outcome)
        return outcome

    def _run(self, code: str, outcome: StepOutcome) -> None:
        output = self._server.post("/execute", task_id=self.task_id, code=code)
        self._blocks.append(code)
        outcome.code = code if outcome.code is None else f"{outcome.code}\n\n{code}"
        outcome.calls += api_calls(code)
        outcome.observations.append(cut_output(output, self.harness.output_chars))
        if output.startswith(FAILED):
            outcome.error = True
            outcome.failing_functions += failing_calls(code, output, self.harness.failing_call)
        outcome.finished = self._server.post("/task_completed", task_id=self.task_id) is True

    def reference_turns(self) -> list[list[Proposal]]:
        """The ground-truth compiled solution, one top-level statement per step (the oracle teacher)."""
        path = self._data / "tasks" / self.task_id / "ground_truth" / "compiled_solution.py"
        if not path.exists():
            raise AmdError(f"{self.task_id}: the AppWorld data has no ground-truth solution ({path}); the oracle "
                           "needs it")
        return [[Proposal(source=block, code=block) for block in solution_blocks(path.read_text(), self.task_id)]]

    def score(self) -> Verdict:
        """AppWorld's evaluation of the final state; failing tests are reported, not raised (suppress_errors)."""
        details = self._server.post("/evaluate", task_id=self.task_id, suppress_errors=True)
        return Verdict(success=details.get("success") is True, details=details,
                       decoded_calls=[[[block] for block in self._blocks]],
                       step_limit_scored=self.harness.step_cap == "scored")

    def close(self) -> None:
        """Close the task's world, drop its outputs and give the server back (once)."""
        server, self._server = self._server, None  # type: ignore[assignment]  # closed: no server
        if server is None:
            return
        try:
            if server.alive:
                server.post("/close", task_id=self.task_id)
        finally:
            shutil.rmtree(self._root / "experiments" / "outputs" / self._experiment, ignore_errors=True)
            self._pool.give_back(server)


# ---- code, read with ast and never run here ------------------------------------------------------------------------

def _end_line(node: ast.expr) -> int:
    """The last line of a parsed node (ast sets it on every node it parses)."""
    return node.end_lineno or node.lineno


def api_calls(code: str) -> list[ExecutedCall]:
    """Every `apis.APP.FUNCTION(...)` call written in the block, in source order: name `APP.FUNCTION`, literal
    keyword arguments (None where the value is not a literal), and the call's own source text."""
    return [ExecutedCall(name=name, arguments=_keyword_literals(node), call=ast.get_source_segment(code, node) or "")
            for node, name in _api_call_nodes(code)]


def failing_calls(code: str, output: str, rule: str = "read") -> list[str]:
    """The API functions an error in a block is blamed on (function memory looks them up), where the traceback ends
    on a line of the block. The project's rule, `read` (the default): the API calls whose results the failing line
    reads, followed through the block's assignments (a name's last assignment above the line, else one at or below
    it, which a loop carries back; a for loop's target from what it iterates), else the API calls on that line,
    else none; an API's own failure (AppWorld's "Response status code is N") is the call on that line that raised.
    `line` (amd's earlier rule): only the calls on that line."""
    lines = INPUT_LINE.findall(output)
    if not lines:
        return []
    line = int(lines[-1])
    calls = _api_call_nodes(code)
    on_line = list(dict.fromkeys(name for node, name in calls if node.lineno <= line <= _end_line(node)))
    if rule == "line" or (on_line and API_FAILURE.search(output)):
        return on_line
    read = _calls_read(code, line)
    return read or on_line


def _calls_read(code: str, line: int) -> list[str]:
    """The API calls whose results flow into the names that line `line` of `code` reads (through assignments)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    sources = _assignments(tree)
    found: list[str] = []
    seen: set[str] = set()
    pending = [node.id for node in ast.walk(tree)
               if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.lineno == line]
    while pending:
        name = pending.pop(0)
        if name in seen:
            continue
        seen.add(name)
        assigned = sources.get(name, [])
        above = [value for at, value in assigned if at < line]
        for value in above[-1:] or [value for at, value in assigned if at >= line]:
            results = _result_calls(value)
            found += results
            if not results:
                pending += [node.id for node in ast.walk(value)
                            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)]
    return list(dict.fromkeys(found))


def _assignments(tree: ast.AST) -> dict[str, list[tuple[int, ast.expr]]]:
    """Name -> (line, the expression its value comes from) for every assignment in the block, in line order."""
    found: dict[str, list[tuple[int, ast.expr]]] = {}
    for node in ast.walk(tree):
        pairs: list[tuple[ast.expr, ast.expr | None]] = []
        if isinstance(node, ast.Assign):
            pairs = [(target, node.value) for target in node.targets]
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.NamedExpr)):
            pairs = [(node.target, node.value)]
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            pairs = [(node.target, node.iter)]
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            pairs = [(item.optional_vars, item.context_expr) for item in node.items if item.optional_vars]
        for target, value in pairs:
            for name in ast.walk(target):
                if isinstance(name, ast.Name) and value is not None:
                    found.setdefault(name.id, []).append((name.lineno, value))
    return {name: sorted(values, key=lambda pair: pair[0]) for name, values in found.items()}


def _result_calls(value: ast.expr) -> list[str]:
    """The API calls whose results the expression's value is made of: every API call in it except those only
    passed as another API call's arguments (that call consumes them)."""
    found: list[str] = []
    pending: list[ast.AST] = [value]
    while pending:
        node = pending.pop(0)
        name = _api_name(node.func) if isinstance(node, ast.Call) else None
        if name:
            found.append(name)
            pending.append(node.func)  # type: ignore[attr-defined]  # a Call: its callee, never its arguments
        else:
            pending.extend(ast.iter_child_nodes(node))
    return found


def _api_call_nodes(code: str) -> list[tuple[ast.Call, str]]:
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    found = [(node, _api_name(node.func)) for node in ast.walk(tree) if isinstance(node, ast.Call)]
    return sorted([(node, name) for node, name in found if name], key=lambda pair: (pair[0].lineno,
                                                                                    pair[0].col_offset))


def _api_name(func: ast.expr) -> str | None:
    """`APP.FUNCTION` for the expression `apis.APP.FUNCTION`, else None."""
    if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Attribute)
            and isinstance(func.value.value, ast.Name) and func.value.value.id == "apis"):
        return f"{func.value.attr}.{func.attr}"
    return None


def _keyword_literals(node: ast.Call) -> dict:
    arguments = {}
    for keyword in node.keywords:
        if keyword.arg is not None:  # **kwargs has no name
            arguments[keyword.arg] = _literal(keyword.value)
    return arguments


def _literal(node: ast.expr):
    """The value of a literal that JSON can hold, as JSON holds it (a tuple becomes a list), else None."""
    try:
        return json.loads(json.dumps(ast.literal_eval(node)))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def solution_blocks(source: str, task_id: str) -> list[str]:
    """The code blocks that replay a ground-truth solution: what precedes `solution` (imports, helpers), then each
    top-level statement of its body. A body that returns or yields at its own level cannot be split: then one
    block defines and calls it, as AppWorld's own verification does."""
    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        raise AmdError(f"{task_id}: the ground-truth solution does not parse: {error}") from None
    solution = next((node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == SOLUTION), None)
    if solution is None:
        raise AmdError(f"{task_id}: the ground-truth solution defines no {SOLUTION}(apis, requester)")
    if _leaves_early(solution.body):
        return [f"{source.strip()}\n\n{SOLUTION}(apis, requester)"]
    header = "\n".join(ast.unparse(node) for node in tree.body if node is not solution)
    body = [ast.unparse(node) for node in solution.body if not _is_docstring(node)]
    return [header, *body] if header else body


def _leaves_early(body: list[ast.stmt]) -> bool:
    """A return, yield, global or nonlocal at the function's own level (not inside a nested def or class)."""
    pending: list[ast.AST] = list(body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Return, ast.Yield, ast.YieldFrom, ast.Global, ast.Nonlocal)):
            return True
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            pending.extend(ast.iter_child_nodes(node))
    return False


def normalised_code(source: str) -> str | None:
    """Code as `ast` reads it, docstrings dropped (None where it does not parse)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and _is_docstring(body[0]):
            node.body = body[1:] or [ast.Pass()]  # type: ignore[attr-defined]  # a node with a statement list
    return ast.unparse(tree)


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


# ---- data, read as files -------------------------------------------------------------------------------------------

def _data_dir(root: str | None) -> Path:
    root = root or os.environ.get("APPWORLD_ROOT")
    if not root:
        raise AmdError("AppWorld needs its task data: give --benchmark-option root=PATH or set APPWORLD_ROOT to the "
                       "folder that holds data/ (AppWorld's own download: `appworld download data`)")
    data = Path(root).expanduser().resolve() / "data"
    if not data.is_dir():
        raise AmdError(f"AppWorld data not found: {data} is missing (AppWorld's own download: "
                       "`appworld download data` in the folder given as root)")
    return data


def _dataset_ids(data: Path, dataset: str) -> list[str]:
    path = data / "datasets" / f"{dataset}.txt"
    if not path.exists():
        known = sorted(p.stem for p in (data / "datasets").glob("*.txt"))
        raise AmdError(f"AppWorld dataset {dataset!r} not found: {path} is missing; datasets here: "
                       f"{', '.join(known) or 'none'}")
    ids = [line.split(":")[0].strip() for line in path.read_text().splitlines() if line.strip()]
    missing = [task_id for task_id in ids if not (data / "tasks" / task_id / "specs.json").exists()]
    if missing:
        raise AmdError(f"AppWorld data is incomplete: {len(missing)} tasks of {dataset} have no "
                       f"{data}/tasks/ID/specs.json, e.g. {missing[0]}")
    return ids


def _tasks_sha256(data: Path, dataset: str, ids: list[str]) -> str:
    """sha256 over the dataset's task list and every listed task's specs (instruction, supervisor, date)."""
    digest = hashlib.sha256((data / "datasets" / f"{dataset}.txt").read_bytes())
    for task_id in ids:
        digest.update((data / "tasks" / task_id / "specs.json").read_bytes())
    return digest.hexdigest()


@functools.cache
def _api_docs(data: Path, app: str) -> dict:
    """API name -> doc of one app (AppWorld's standard API docs), {} for an app without docs."""
    path = data / "api_docs" / "standard" / f"{app}.json"
    docs = json.loads(path.read_text()) if path.exists() else {}
    for doc in docs.values():
        doc.pop("canary_string", None)
    return docs


def _run_root(data: Path) -> Path:
    """AppWorld's root for amd's servers: a folder in amd's cache whose data/ links to the user's data, so
    AppWorld's outputs stay in the cache."""
    root = cache_dir("appworld", "root-" + hashlib.sha256(str(data).encode()).hexdigest()[:16])
    link = root / "data"
    if not link.is_symlink():
        try:
            link.symlink_to(data, target_is_directory=True)
        except FileExistsError:  # another run made it at the same moment
            pass
    elif link.resolve() != data:
        raise AmdError(f"{link} links to {link.resolve()}, not to {data}; remove it")
    return root
