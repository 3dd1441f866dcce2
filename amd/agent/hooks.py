"""How memory reaches the agent loop. A memory method (`amd.memory`) offers `MemoryHooks`; zero-shot runs pass None.
The loop never imports a memory method: what a method needs from the student (a decomposition into subtasks,
keywords) it asks through `TaskContext.student`, with its own prompts."""

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from amd.benchmarks.base import Benchmark
from amd.core.prompts import load_prompt
from amd.core.text import without_controls
from amd.core.trajectory import InjectionRecord, MemoryQuery, TrajectoryRecord

if TYPE_CHECKING:  # amd.llm's package imports the openai SDK
    from amd.llm.base import Chat


@dataclass
class TaskContext:
    """The task a hook is called for."""

    task_id: str
    task_group: str  # the scenario the task belongs to; memory from the same group is never retrieved
    instruction: str  # the retrieval query (the task's instruction)
    student: "Chat | None" = None  # the student's chat (messages -> amd.llm.ChatReply); None without a model
    # The run's sampling seed (None without one): a method that samples the student several times derives its
    # per-sample seeds from it (chat(messages, sampling={"seed": ...})), so repeats of a run draw different samples.
    seed: int | None = None
    # Every user turn known before the task starts (Episode.known_turns; BFCL: all of them) and the tools' names:
    # what a decomposition of the whole task reads (AMD's run option decompose_input=task)
    turns: list[str] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    # What the task has done so far, kept by the agent loop: the current user turn and every executed call
    # (canonical text, in order), for hooks that rank by them (AMD's run option fn_rank)
    turn: str = ""
    calls: list[str] = field(default_factory=list)


@dataclass
class Injection:
    """What a hook gives the agent, and what the trajectory records of it."""

    text: str = ""  # what the agent sees ("" for nothing)
    # What was injected (the trajectory's injection records): type, entry_id, source_task_id, similarity, query
    records: list[InjectionRecord] = field(default_factory=list)
    # What the method decided beside its injections (a checked decomposition, hints it withheld); recorded as the
    # trajectory's `memory_details` (task start) or the step's (after an error) when not empty.
    details: dict[str, Any] = field(default_factory=dict)
    # What each retrieval query saw (amd.memory.method.query_record: type, query, entries found at or above δ, the
    # best similarity even below it), recorded as the trajectory's `memory_queries`: how hard δ holds memory back.
    queries: list[MemoryQuery] = field(default_factory=list)
    # Where it goes (the paper's and its release's placements): at task start, `first` puts the text before the
    # system prompt instead of after it; at a user turn, `in_system` puts it in the system prompt, replacing the
    # previous turn's, instead of after the user message (the release's BFCL `system_replace`).
    first: bool = False
    in_system: bool = False


_DELIMITER = re.compile(r"</?\s*retrieved-memory\s*>", re.IGNORECASE)  # prompts/memory_wrapper.md's tags


def as_retrieved_memory(text: str) -> str:
    """Memory as the student sees it: delimited and labelled as retrieved examples, data and never instructions
    (prompts/memory_wrapper.md), its control characters dropped and the delimiter taken out of it, so that text a
    tool once returned cannot close the block early. "" (nothing injected) stays ""."""
    if not text:
        return ""
    return load_prompt("memory_wrapper").format(memory=_DELIMITER.sub("", without_controls(text))).strip()


@dataclass
class RunContext:
    """What a memory method learns of the run before its first task (methods that update memory online)."""

    benchmark: Benchmark  # the benchmark the run is on (its function docs and apps)
    out_path: Path  # the run's output; a method keeps what it adds beside it
    task_ids: list[str]  # every task of the run, in its fixed order
    finished: list[TrajectoryRecord]  # the records already in the output (a resumed run), in file order


class MemoryHooks(Protocol):
    """A memory config opened over a bank for one run. Required: `describe`; every hook has a default that injects
    nothing (amd.memory.method.BankHooks adds retrieval under the leakage protocols)."""

    # True for a method whose memory changes as tasks finish: the runner then runs one task at a time, in task
    # order, so that each task sees exactly the memory its predecessors left.
    one_task_at_a_time: bool = False

    def describe(self) -> dict[str, Any]:
        """The trajectory's `memory` field: config, method, bank, bank_sha256, protocol, k, delta."""
        ...

    def task_start(self, task: TaskContext) -> Injection:
        """Text for the system prompt (after the tool docs, or before the prompt with `first`), at task start."""
        return Injection()

    def user_turn(self, task: TaskContext, message: str) -> Injection:
        """Text appended to a user turn (or, with `in_system`, the system prompt's memory for this turn)."""
        return Injection()

    def after_error(self, task: TaskContext, failing_functions: list[str]) -> Injection:
        """A hint block appended after an error observation."""
        return Injection()

    def run_start(self, run: RunContext) -> None:
        """Called once before the run's first task."""
        return

    def seed(self, source_out: Path, out_path: Path, records: list[TrajectoryRecord]) -> int:
        """Before a run seeded from another copy of its output (amd run --resume-from), ahead of `run_start`: copy
        what the method keeps beside `source_out` for `records` (the run's first tasks, in order, for a memory that
        runs one task at a time) beside `out_path`; return how many of them it can resume. A method that keeps
        nothing beside the output resumes them all."""
        return len(records)

    def episode_end(self, task: TaskContext, record: dict[str, Any]) -> None:
        """Called with each finished task's trajectory record just before it is written to the output (methods
        that update memory online); an exception here leaves the task unwritten, so a rerun retries it."""
        return

    def run_end(self) -> None:
        """Called once when the run ends, finished or not."""
        return
