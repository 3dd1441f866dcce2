"""Every plug-in point of amd in one file: a name maps to a lazy `module:attr` string, so listing names imports
nothing and an unused plug-in costs nothing. A misspelt name gets "did you mean".

To add a benchmark, a memory method, an agent, an embedder or an output (table or figure), write its module and
add one line here. A memory method's line also declares its memory types and its named memory configs
(`amd.vocabulary`), so the command line, the config schema and the workflow know them without importing it.
"""

import importlib
from dataclasses import dataclass, field

from amd.errors import AmdError, did_you_mean
from amd.vocabulary import AMD_CONFIGS, AMD_ONLINE, AMD_TYPES, AMD_VARIANTS, MemoryType


@dataclass(frozen=True)
class Entry:
    name: str
    target: str | None  # "module:attr"; None for an entry that is declared but cannot run here
    unavailable: str | None = None  # why a declared entry cannot run
    meta: dict = field(default_factory=dict)


class Registry:
    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, Entry] = {}

    def add(self, name: str, target: str | None = None, *, unavailable: str | None = None, **meta) -> None:
        if name in self._entries:
            raise AmdError(f"{self.kind} {name!r} is registered twice")
        if (target is None) == (unavailable is None):
            raise AmdError(f"{self.kind} {name!r}: give either a target or the reason it is unavailable")
        self._entries[name] = Entry(name, target, unavailable, meta)

    def names(self) -> list[str]:
        return list(self._entries)

    def entries(self) -> list[Entry]:
        return list(self._entries.values())

    def entry(self, name: str) -> Entry:
        if name not in self._entries:
            raise AmdError(f"unknown {self.kind} {name!r}{did_you_mean(name, self._entries)}; "
                           f"known: {', '.join(self._entries)}")
        return self._entries[name]

    def load(self, name: str):
        """The registered object (class or function), imported on first use."""
        entry = self.entry(name)
        if entry.target is None:
            raise AmdError(f"{self.kind} {name!r} is declared but cannot run here: {entry.unavailable}")
        module, _, attr = entry.target.partition(":")
        return getattr(importlib.import_module(module), attr)


BENCHMARKS = Registry("benchmark")
BENCHMARKS.add("bfcl", "amd.benchmarks.bfcl:BfclMultiTurn")
# meta `setup`: a make target that prepares what the benchmark needs beside amd's environment (the workflow runs it
# before the benchmark's first job).
BENCHMARKS.add("appworld", "amd.benchmarks.appworld:AppWorld", setup="appworld-venv")
BENCHMARKS.add("toolsandbox", "amd.benchmarks.toolsandbox:ToolSandbox")
# An extension: AgentDojo is not one of the paper's benchmarks (options: suite=banking,slack,...).
BENCHMARKS.add("agentdojo", "amd.benchmarks.agentdojo:AgentDojo")

# Agents that act without a model are chosen by their own name as the agent spec; every other spec (openai:,
# vllm:, local:) is a model (amd.llm.specs) driven by the `model` agent.
AGENTS = Registry("agent")
AGENTS.add("model", "amd.agent.agents:ModelAgent")
AGENTS.add("oracle", "amd.agent.agents:OracleAgent")

# meta: types (MemoryType, ...) and configs {config name: (type code, ...) or {"types": (...), "options": {...}}}
# (a config with options is a variant of its method, e.g. {"options": {"fn_gate": "repeat"}}); `zero_shot` is
# built in. AMD's variants beyond the paper include online memory (amd.memory.amd.online): the bank grows with the
# student's own successes during the run, entries that keep failing lose rank; tasks run one at a time in task order.
MEMORY_METHODS = Registry("memory method")
MEMORY_METHODS.add("amd", "amd.memory.amd:AmdMemory", types=AMD_TYPES,
                   configs=AMD_CONFIGS | AMD_VARIANTS | AMD_ONLINE)
# The paper's Table 1 baselines, built from every teacher trajectory (successes and failures, as the AMD authors'
# release builds them); k as in that release, no δ (it has none). meta `released_for`: the benchmarks for which that
# release holds the method's code (for ToolSandbox and BFCL it has run and build scripts whose modules are missing,
# so there our settings are carried over: a reconstruction); `reconstructed`: what is ours on every benchmark.
# Both go into the note of table1_main.
MEMORY_METHODS.add("reasoningbank", "amd.memory.reasoningbank:ReasoningBank",
                   types=(MemoryType("rb", "reasoning", embedded="query", lookup="vector", default_k=3,
                                     default_delta=None),),
                   configs={"reasoningbank": ("rb",)}, released_for=("appworld",),
                   reconstructed="our prompts and rules writer after the original's extraction prompts")
MEMORY_METHODS.add("memp", "amd.memory.memp:Memp",
                   types=(MemoryType("memp", "procedure", embedded="key", lookup="avefact", default_k=3,
                                     default_delta=None),),
                   configs={"memp": ("memp",)}, released_for=("appworld",),
                   reconstructed="our prompts and rules writer after the release's keyword and script prompts")
MEMORY_METHODS.add("sasm", "amd.memory.sasm:Sasm",
                   types=(MemoryType("sasm", "stage", embedded="description", lookup="stage-gated vector",
                                     default_k=1, default_delta=None),),
                   configs={"sasm": ("sasm",)}, released_for=("appworld",),
                   reconstructed="no official code; the release's AppWorld stages (explore, authenticate, query, "
                   "execute, verify) used for every benchmark, upfront variant only")

# Who writes memory: `rules` (deterministic, model-free) or any model spec (amd.llm.specs).
WRITERS = Registry("memory writer")
WRITERS.add("rules", "amd.memory.writing:RulesWriter")
WRITERS.add("model", "amd.memory.writing:ModelWriter")

# Embedders by the kind before the colon of their spec (local:all-minilm-l6-v2, openai:MODEL, hash:DIM).
EMBEDDERS = Registry("embedder")
EMBEDDERS.add("local", "amd.memory.embed:LocalMiniLM", example="local:all-minilm-l6-v2")
EMBEDDERS.add("openai", "amd.memory.embed:OpenAIEmbedder", example="openai:text-embedding-3-small")
EMBEDDERS.add("hash", "amd.memory.embed:HashEmbedder", example="hash:DIM (tests only)")

# Tables and figures of `amd table` / `amd figure` and of the workflow's `outputs`.
OUTPUTS = Registry("output")
for _table in ("table1_main", "table2_ablation", "table3_teacher", "table4_representation", "table5_repeats",
               "table6_protocols"):
    OUTPUTS.add(_table, f"amd.analysis.tables:{_table}", kind="table")
# Beyond the paper's tables: each task with and without memory, and an exact sign test on the pairs.
OUTPUTS.add("paired_tasks", "amd.analysis.paired:paired_tasks", kind="table")
OUTPUTS.add("security_pairs", "amd.analysis.paired:security_pairs", kind="table")
# Beyond the paper: AMD's config variants against their plain config (checked decomposition; gated and compressed
# function memory).
OUTPUTS.add("decomposition_check", "amd.analysis.paired:decomposition_check", kind="table")
OUTPUTS.add("function_gating", "amd.analysis.paired:function_gating", kind="table")
# Several teachers: single-teacher memory beside a bank pooled from several (amd memory pool).
OUTPUTS.add("table_multi_teacher", "amd.analysis.teachers:table_multi_teacher", kind="table")
# Beyond the paper: the teacher-student fit probe, ranked and checked against the grid where it has run.
OUTPUTS.add("probe_fit", "amd.analysis.teachers:probe_fit", kind="table")
# Online memory against the same bank frozen, on the same tasks, paired, with a sign test.
OUTPUTS.add("online_vs_frozen", "amd.analysis.paired:online_vs_frozen", kind="table")
for _figure in ("fig3_steps", "fig4_student_size", "fig5_k_sweep"):
    OUTPUTS.add(_figure, f"amd.analysis.figures:{_figure}", kind="figure")


def create_benchmark(name: str, **options):
    """A benchmark object by its registered name (options are the benchmark's own, e.g. a suite)."""
    return BENCHMARKS.load(name)(**options)
