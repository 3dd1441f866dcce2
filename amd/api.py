"""The public API of amd: everything a plug-in imports, from this one module.

A plug-in is a benchmark, a memory method, or a table or figure, in a module of its own (in amd's tree with a line in
amd/plugins.toml, or in an installed distribution that declares it under an entry point group: `amd.benchmarks`,
`amd.memory_methods`, `amd.tables`, `amd.figures`). Each contract below is a typed Protocol or base class that
declares every member amd reads; optional members have their defaults there.

- A benchmark subclasses `Benchmark` (required: `name`, `task_ids`, `data_version`, `start`) and its episodes
  subclass `Episode` (required: `task_id`, `instruction`, `tools`, `next_user_message`, `execute`, `score`), or
  `CallByCallEpisode` for tool calls run one at a time. Its entry point names the class, created with the
  benchmark's options as keyword arguments.
- A memory method has two modules: a light one holding its `MethodSpec` (the entry point names it: types, configs,
  options, tables, read without importing the method), and the method itself, a class (`MemoryMethod`: `name`,
  `version`, `build`, `open`) whose `open` returns hooks, usually a subclass of `BankHooks` (retrieval under the
  leakage protocols; `BankHooks.excluded(task)` is the task's `Exclusion`, for a method that picks entries itself).
  Options arrive parsed by their `Option` declaration: bool, int, float or str.
- Mark a plug-in's classes `@typing.final` and run a type checker (mypy) over them: it then names any required
  member a class lacks, before any run does.

The memory-side names that need numpy and faiss (`BankHooks`, `Bank`, `BankContents`, `BuildContext`,
`RetrievalSettings`, `MemoryMethod`, `Writer`, `injection_records`, `query_record`), `student_runs` (pandas) and
`Chat`, `ChatReply` (the openai SDK) are imported on first use, so a spec module that imports this one stays light.
"""

from typing import TYPE_CHECKING

from amd.agent.base import Agent, AgentReply
from amd.agent.hooks import Injection, MemoryHooks, RunContext, TaskContext
from amd.benchmarks.base import (
    CALLS,
    CODE,
    Benchmark,
    CallByCallEpisode,
    CallRejected,
    Episode,
    ExecutedCall,
    FunctionInfo,
    Proposal,
    StepOutcome,
    TaskSignature,
    Verdict,
    called_name,
    canonical_call,
    mark_failed,
    refuse,
)
from amd.core.errors import AmdError
from amd.core.registry import BENCHMARKS, MEMORY_METHODS, OUTPUTS, Registry, load_target
from amd.core.spec import Config, MemoryType, MethodSpec, Option, OptionValue, Setting
from amd.core.trajectory import EpisodeRecord, InjectionRecord, MemoryQuery, TrajectoryRecord
from amd.core.vocabulary import MemoryConfig
from amd.memory.bank_schema import BankEntry, BankManifest
from amd.memory.protocols import Exclusion

if TYPE_CHECKING:
    from amd.analysis.cells import student_runs
    from amd.llm.base import Chat, ChatReply
    from amd.memory.bank import Bank, BankContents
    from amd.memory.method import (
        BankHooks,
        BuildContext,
        MemoryMethod,
        RetrievalSettings,
        Writer,
        injection_records,
        query_record,
    )

_LAZY = {"Bank": "amd.memory.bank", "BankContents": "amd.memory.bank", "BankHooks": "amd.memory.method",
         "BuildContext": "amd.memory.method", "MemoryMethod": "amd.memory.method",
         "RetrievalSettings": "amd.memory.method", "Writer": "amd.memory.method",
         "injection_records": "amd.memory.method", "query_record": "amd.memory.method",
         "student_runs": "amd.analysis.cells", "Chat": "amd.llm.base", "ChatReply": "amd.llm.base"}

__all__ = [
    "BENCHMARKS",
    "CALLS",
    "CODE",
    "MEMORY_METHODS",
    "OUTPUTS",
    "Agent",
    "AgentReply",
    "AmdError",
    "Bank",
    "BankContents",
    "BankEntry",
    "BankHooks",
    "BankManifest",
    "Benchmark",
    "BuildContext",
    "CallByCallEpisode",
    "CallRejected",
    "Chat",
    "ChatReply",
    "Config",
    "Episode",
    "EpisodeRecord",
    "Exclusion",
    "ExecutedCall",
    "FunctionInfo",
    "Injection",
    "InjectionRecord",
    "MemoryConfig",
    "MemoryHooks",
    "MemoryMethod",
    "MemoryQuery",
    "MemoryType",
    "MethodSpec",
    "Option",
    "OptionValue",
    "Proposal",
    "Registry",
    "RetrievalSettings",
    "RunContext",
    "Setting",
    "StepOutcome",
    "TaskContext",
    "TaskSignature",
    "TrajectoryRecord",
    "Verdict",
    "Writer",
    "called_name",
    "canonical_call",
    "injection_records",
    "mark_failed",
    "query_record",
    "refuse",
    "student_runs",
]

if not TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        if name not in _LAZY:
            raise AttributeError(f"module 'amd.api' has no attribute {name!r}")
        return load_target(f"{_LAZY[name]}:{name}")

    def __dir__() -> list[str]:
        """The module's names and the lazily loaded ones, so `dir()` and `help(amd.api)` list every public name."""
        return sorted(set(globals()) | set(_LAZY))
