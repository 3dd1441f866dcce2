"""AMD's retrieval and injection (paper Section 3.3).

Proactive, at task start: top-k workflow entries by the instruction; the student decomposes the instruction into
at most six subtask labels, each label retrieves top-k subtask segments, duplicates dropped; both go into the
system prompt. With the run option `per_turn`, subtasks are retrieved by each user turn instead (as the authors
did for BFCL), appended to the turn's user message, or with `turn_memory=system` put in the system prompt in place
of the previous turn's (the release's BFCL `system_replace`). Reactive, after an error: the failing function's
records, looked up by name, ranked by cosine(instruction, record reasoning), top-k appended after the error. δ
applies to the vector types only.

The paper's and its release's settings, each a run option: `placement=before` puts the memory before the system
prompt (the paper "prepends" it; default `after`, behind the stable tool docs); `fn_doc=true` shows each hint's
function doc (the argument and response schema App. C gives AppWorld's function memory); `prompts=benchmark`
decomposes with the benchmark's own prompt where prompts/ has one (decompose_appworld.md: the paper's Fig. 15 is
AppWorld's, with a login prior).

Beyond the paper, two run options (each a config variant of AMD's spec, amd.methods.amd.spec):
`decompose_samples=n` (n > 1) decomposes the instruction n more times at `decompose_temperature`, one seed each,
and retrieves by the labels the samples agree on (amd.methods.amd.decompose); `fn_gate=repeat` gives function memory
for a function only from its second error in the task on (its first error gets no hint, recorded as withheld).
Online (run option `online`, amd.methods.amd.online), entries that failed rank lower; a frozen bank ranks by cosine.
"""

import threading
from collections import Counter
from typing import Any

import numpy as np

from amd.agent.hooks import Injection, TaskContext
from amd.core.errors import AmdError
from amd.core.prompts import benchmark_prompt, load_prompt
from amd.core.trajectory import MemoryQuery, recorded
from amd.memory.method import BankHooks, injection_records, query_record
from amd.methods.amd.decompose import checked_decomposition, decompose_instruction
from amd.methods.amd.render import check_representation, parse_representation, render_block
from amd.methods.amd.spec import RECORD_DEFAULTS, RUN_OPTIONS

FN_GATES = RUN_OPTIONS["fn_gate"].choices  # repeat: no function memory on a function's first error in the task
TURN_MEMORY = RUN_OPTIONS["turn_memory"].choices  # user: after the turn's message; system: in the system message
PLACEMENTS = RUN_OPTIONS["placement"].choices  # where task-start memory goes: after the system prompt, or before it
PROMPT_SETS = RUN_OPTIONS["prompts"].choices  # benchmark: the benchmark's own prompts where prompts/ has them
DECOMPOSE_INPUTS = RUN_OPTIONS["decompose_input"].choices  # instruction, or task: every known turn and the tools
FN_RANKS = RUN_OPTIONS["fn_rank"].choices  # instruction, turn (cosine to them), calls (their trigrams found)
RECENT_CALLS = 4  # fn_rank=calls: the failing call and up to three before it
NGRAM = 3
SUBTASK_VIEWS = RUN_OPTIONS["subtask_view"].choices  # steps: with observations and user turns; calls: calls only
DEFAULT_DECOMPOSE_TEMPERATURE = 0.7  # Qwen3's recommended non-thinking temperature: samples that differ


class AmdHooks(BankHooks):
    def __init__(self, bank, config, settings):
        super().__init__(bank, config, settings)
        options = settings.options  # parsed by the spec's declarations (amd.memory.method.open_memory)
        per_turn = bool(options.get("per_turn", False))
        self.per_turn_subtasks = "subtask" in self.types and per_turn
        self.subtasks_in_system = options.get("turn_memory", TURN_MEMORY[0]) == "system"
        if self.subtasks_in_system and not per_turn:
            raise AmdError("memory option turn_memory=system places subtasks retrieved per turn: it needs per_turn=true")
        self.placement = str(options.get("placement", PLACEMENTS[0]))
        self.fn_doc = bool(options.get("fn_doc", False))
        self.subtask_view = str(options.get("subtask_view", SUBTASK_VIEWS[0]))
        self.subtask_calls = int(options.get("subtask_calls", 0))  # with subtask_view=calls only
        benchmarks = bank.manifest.get("benchmarks") or [None]
        self.decompose_prompt = benchmark_prompt("decompose", benchmarks[0]) \
            if options.get("prompts", PROMPT_SETS[0]) == "benchmark" and len(benchmarks) == 1 else "decompose"
        self.representation = check_representation(parse_representation(options.get("representation") or {}),
                                                   bank.manifest["representation"]["default"])
        self.decompose_input = str(options.get("decompose_input", DECOMPOSE_INPUTS[0]))
        self.decompose_samples = int(options.get("decompose_samples", 1))
        self.decompose_temperature = float(options.get("decompose_temperature", DEFAULT_DECOMPOSE_TEMPERATURE))
        if not self.decompose_temperature > 0:
            raise AmdError("memory option decompose_temperature must be a number > 0 (samples that vary), got "
                           f"{options['decompose_temperature']!r}")
        if self.decompose_samples > 1 and ("subtask" not in self.types or self.per_turn_subtasks):
            raise AmdError("memory option decompose_samples needs subtask memory retrieved at task start (a config "
                           "with st, per_turn false)")
        self.fn_gate = str(options.get("fn_gate", FN_GATES[0]))
        self.fn_rank = str(options.get("fn_rank", FN_RANKS[0]))
        self._function_errors: dict[str, Counter] = {}  # per task id (hooks serve every task of a run at once)
        self._errors_lock = threading.Lock()
        self.function_vectors = self.bank.vectors("function")
        self.by_name: dict[str, list[int]] = {}
        self._index_function_names(0)

    def _index_function_names(self, first_row: int) -> None:
        """Function entries from `first_row` on, by name and by app.name."""
        for row, entry in enumerate(self.bank.entries["function"][first_row:], start=first_row):
            self.by_name.setdefault(entry["name"], []).append(row)
            if entry.get("app"):
                self.by_name.setdefault(f"{entry['app']}.{entry['name']}", []).append(row)

    def describe(self) -> dict[str, Any]:
        described = {**super().describe(), "representation": {t: self.representation[t] for t in self.types},
                     "per_turn": self.per_turn_subtasks,
                     "turn_memory": "system" if self.subtasks_in_system and self.per_turn_subtasks else "user",
                     "placement": self.placement, "fn_doc": self.fn_doc, "decompose_prompt": self.decompose_prompt,
                     "subtask_view": self.subtask_view, "decompose_input": self.decompose_input,
                     "fn_rank": self.fn_rank}
        if self.subtask_view == "calls":
            described["subtask_calls"] = self.subtask_calls
        if self.decompose_samples > 1:  # the samples' temperature only where there are samples
            described |= {"decompose_samples": self.decompose_samples,
                          "decompose_temperature": self.decompose_temperature}
        return recorded(described | {"fn_gate": self.fn_gate}, RECORD_DEFAULTS)

    def task_start(self, task: TaskContext) -> Injection:
        with self._errors_lock:
            self._function_errors.pop(task.task_id, None)
        details: dict[str, Any]
        queries: list[MemoryQuery]
        blocks, records, details, queries = [], [], {}, []
        if "workflow" in self.types:
            hits = self.search("workflow", task.instruction, task, queries)
            blocks.append(self._block("workflow", hits))
            records += injection_records("workflow", hits, task.instruction)
        if "subtask" in self.types and not self.per_turn_subtasks:
            labels, details = self._labels(task)
            seen: set[str]
            seen, hits_by_label = set(), []
            for label in labels:
                fresh = [(e, s) for e, s in self.search("subtask", label, task, queries) if e["id"] not in seen]
                seen.update(e["id"] for e, _ in fresh)
                hits_by_label.append((label, fresh))
            blocks.append(self._block("subtask", [hit for _, hits in hits_by_label for hit in hits]))
            records += [r for label, hits in hits_by_label for r in injection_records("subtask", hits, label)]
        return Injection("\n\n".join(block for block in blocks if block), records, details,
                         first=self.placement == "before", queries=queries)

    def _labels(self, task: TaskContext) -> tuple[list[str], dict]:
        """The subtask queries, and what a checked decomposition records."""
        if not task.student:
            return [task.instruction], {}
        decomposed = self._decomposed(task)
        if self.decompose_samples == 1:
            return decompose_instruction(task.student, decomposed, self.decompose_prompt), {}
        checked = checked_decomposition(task.student, decomposed, self.decompose_samples,
                                        self.decompose_temperature, task.seed, self.decompose_prompt)
        return checked.merged, {"decomposition": checked.record()}

    def _decomposed(self, task: TaskContext) -> str:
        """What the student decomposes: the instruction, or (decompose_input=task) every known user turn and the
        tools' names."""
        if self.decompose_input == "instruction":
            return task.instruction
        turns = "\n".join(f"{n}. {turn}" for n, turn in enumerate(task.turns or [task.instruction], start=1))
        return load_prompt("decompose_task_input").format(turns=turns, tools=", ".join(task.tools) or "none").strip()

    def user_turn(self, task: TaskContext, message: str) -> Injection:
        if not self.per_turn_subtasks:
            return Injection()
        queries: list[Any] = []
        hits = self.search("subtask", message, task, queries)
        return Injection(self._block("subtask", hits), injection_records("subtask", hits, message),
                         in_system=self.subtasks_in_system, queries=queries)

    def after_error(self, task: TaskContext, failing_functions: list[str]) -> Injection:
        """Per failing function name: its records, ranked (`_rank_scores`) less the bank's penalty (none when
        frozen), top-k. Under fn_gate=repeat, a function's first error in the task gets none (recorded as
        withheld)."""
        if "function" not in self.types:
            return Injection()
        names = list(dict.fromkeys(failing_functions))
        earlier = self._count_errors(task, names)
        excluded = self.excluded(task)
        entries = self.bank.entries["function"]
        hits: list[tuple[int, float]]
        query, hits, records, withheld, queries = None, [], [], [], []
        for name in names:
            rows = [row for row in dict.fromkeys(self.by_name.get(name, []))
                    if not excluded.hides(entries[row]) and all(row != r for r, _ in hits)]
            if not rows:
                queries.append(query_record("function", name, 0, None))  # no record of the function to show
                continue
            if self.fn_gate == "repeat" and earlier[name] == 0:
                withheld.append(name)
                continue
            scores, query = self._rank_scores(task, rows, query)
            ranks = (np.asarray(scores) - self.bank.penalties("function", rows)).tolist()
            order = sorted(range(len(rows)), key=lambda i: (-ranks[i], rows[i]))[: self.settings.k["function"]]
            ranked = [(rows[i], scores[i]) for i in order]
            hits += ranked
            records += injection_records("function", [(entries[r], s) for r, s in ranked], name)
            queries.append(query_record("function", name, len(ranked), ranked[0][1]))
        details = {"fn_gate": {"withheld": withheld}} if withheld else {}
        return Injection(self._block("function", [(entries[row], score) for row, score in hits]), records, details,
                         queries=queries)

    def _rank_scores(self, task: TaskContext, rows: list[int], query):
        """How well each record of `rows` fits the task now: cosine(instruction or current turn, record reasoning),
        or (fn_rank=calls) the share of the character trigrams of the task's last calls that the record's reasoning
        holds. Returns the scores and the query vector, embedded once per error step."""
        if self.fn_rank == "calls":
            recent = ngrams("; ".join(task.calls[-RECENT_CALLS:]))
            return [contained(recent, ngrams(self.bank.entries["function"][row]["reasoning"])) for row in rows], query
        if query is None:
            query = self.embedder.embed_one(task.turn if self.fn_rank == "turn" and task.turn else task.instruction)
        return (self.function_vectors[rows] @ query).tolist(), query

    def episode_end(self, task: TaskContext, record: dict) -> None:
        with self._errors_lock:
            self._function_errors.pop(task.task_id, None)

    def _count_errors(self, task: TaskContext, names: list[str]) -> Counter:
        """Counts this error step's failing functions for the task; returns the counts before it."""
        with self._errors_lock:
            counts = self._function_errors.setdefault(task.task_id, Counter())
            earlier = Counter({name: counts[name] for name in names})
            counts.update(names)
        return earlier

    def _block(self, memory_type: str, hits: list[tuple[dict, float]]) -> str:
        return render_block(memory_type, [entry for entry, _ in hits], self.representation[memory_type],
                            with_doc=self.fn_doc,
                            subtask_calls=self.subtask_calls if self.subtask_view == "calls" else None)


def ngrams(text: str, n: int = NGRAM) -> set[str]:
    """The character n-grams of `text`, lower-cased with its whitespace collapsed."""
    text = " ".join(text.lower().split())
    return {text[i: i + n] for i in range(len(text) - n + 1)}


def contained(part: set[str], whole: set[str]) -> float:
    """The share of `part` that `whole` holds (0 for an empty part)."""
    return len(part & whole) / len(part) if part else 0.0
