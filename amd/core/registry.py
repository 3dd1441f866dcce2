"""Every plug-in point of amd in one file: a name maps to a lazy `module:attr` string, so listing names imports
nothing and an unused plug-in costs nothing. A misspelt name gets "did you mean".

To add a benchmark, a memory method, an agent, an embedder or an output (table or figure), write its module and
add one line here, or let an installed package declare it under the registry's entry point group (below, e.g.
`amd.memory_methods`), so that a plug-in can live outside this tree. A memory method's entry is its spec
(`amd.core.spec.MethodSpec`, a small module beside the method): its types, configs, options and tables, read without
importing the method.
"""

import importlib
import importlib.metadata
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from amd.core.errors import AmdError, did_you_mean
from amd.core.spec import MethodSpec

if TYPE_CHECKING:  # types only: the plug-ins' layers sit above this module
    from amd.agent.base import Agent
    from amd.benchmarks.base import Benchmark

T = TypeVar("T")


@dataclass(frozen=True)
class Entry:
    """One registered name: what it loads, or why it cannot run here, and what its registry records beside it."""

    name: str
    target: str | None  # "module:attr"; None for an entry that is declared but cannot run here
    unavailable: str | None = None  # why a declared entry cannot run
    meta: dict[str, Any] = field(default_factory=dict)


class Registry(Generic[T]):
    """Names of one kind of plug-in, each loading an object of type T: entries added here, then, on first listing,
    those of installed packages' entry points (`groups`: entry point group -> the meta its entries get) and of any
    `sources` (functions that yield (name, target, meta), e.g. the tables memory methods declare). `check` says
    what a loaded object must be (a class, or a callable); a target that is something else is refused, naming it."""

    def __init__(self, kind: str, groups: dict[str, dict[str, Any]] | None = None, *,
                 check: Callable[[object], bool] = callable, expected: str = "a callable"):
        self.kind, self.groups = kind, groups or {}
        self._check, self._expected = check, expected
        self._entries: dict[str, Entry] = {}
        self._sources: list[Callable[[], Iterable[tuple[str, str, dict[str, Any]]]]] = []
        self._discovered = not self.groups
        self._discovering = threading.RLock()

    def add(self, name: str, target: str | None = None, *, unavailable: str | None = None, **meta: Any) -> None:
        if name in self._entries:
            raise AmdError(f"{self.kind} {name!r} is registered twice")
        if (target is None) == (unavailable is None):
            raise AmdError(f"{self.kind} {name!r}: give either a target or the reason it is unavailable")
        self._entries[name] = Entry(name, target, unavailable, meta)

    def add_source(self, source: Callable[[], Iterable[tuple[str, str, dict[str, Any]]]]) -> None:
        self._sources.append(source)
        self._discovered = False

    def _discover(self) -> None:
        with self._discovering:  # one thread discovers; the others wait for its entries, never see half of them
            if self._discovered:  # or the discovering thread asks again, from a source
                return
            self._discovered = True
            found = [(point.name, point.value, meta) for group, meta in self.groups.items()
                     for point in importlib.metadata.entry_points(group=group)]
            for source in self._sources:
                found += list(source())
            for name, target, meta in found:
                self.add(name, target, **meta)

    def names(self) -> list[str]:
        self._discover()
        return list(self._entries)

    def entries(self) -> list[Entry]:
        self._discover()
        return list(self._entries.values())

    def entry(self, name: str) -> Entry:
        self._discover()
        if name not in self._entries:
            raise AmdError(f"unknown {self.kind} {name!r}{did_you_mean(name, self._entries)}; "
                           f"known: {', '.join(self._entries)}")
        return self._entries[name]

    def load(self, name: str) -> T:
        """The registered object (class, function or spec), imported on first use."""
        entry = self.entry(name)
        if entry.target is None:
            raise AmdError(f"{self.kind} {name!r} is declared but cannot run here: {entry.unavailable}")
        found = load_target(entry.target)
        if not self._check(found):
            raise AmdError(f"{self.kind} {name!r}: {entry.target} must be {self._expected}, got {found!r}")
        return cast(T, found)


_importing = threading.RLock()  # one target imported at a time: plug-ins importing each other never deadlock


def load_target(target: str) -> Any:
    """The object a "module:attr" string names. Thread-safe: while one thread runs a module's code, the others wait
    for it to finish (`sys.modules` alone would hand them the half-initialised module: "partially initialized
    module" under a memory writer's threads)."""
    module, _, attr = target.partition(":")
    with _importing:
        return getattr(importlib.import_module(module), attr)


BENCHMARKS: Registry[Callable[..., "Benchmark"]] = Registry("benchmark", groups={"amd.benchmarks": {}})
BENCHMARKS.add("bfcl", "amd.benchmarks.bfcl:BfclMultiTurn")
# meta `setup`: a make target that prepares what the benchmark needs beside amd's environment (the workflow runs it
# before the benchmark's first job); meta `model_options`: its options whose value is a model spec (amd.llm.specs),
# checked with the config's agents before any job runs.
BENCHMARKS.add("appworld", "amd.benchmarks.appworld:AppWorld", setup="appworld-venv")
BENCHMARKS.add("toolsandbox", "amd.benchmarks.toolsandbox:ToolSandbox", model_options=("user_model",))
# An extension: AgentDojo is not one of the paper's benchmarks (options: suite=banking,slack,...).
BENCHMARKS.add("agentdojo", "amd.benchmarks.agentdojo:AgentDojo")

# Agents that act without a model are chosen by their own name as the agent spec; every other spec (openai:,
# vllm:, local:) is a model (amd.llm.specs) driven by the `model` agent.
AGENTS: Registry[type["Agent"]] = Registry("agent", check=lambda found: isinstance(found, type), expected="a class")
AGENTS.add("model", "amd.agent.agents:ModelAgent")
AGENTS.add("oracle", "amd.agent.agents:OracleAgent")

# Each entry is the method's spec (amd.core.spec.MethodSpec): its memory types, named configs (a config with options is a
# variant of its method), build and run options, its tables; `zero_shot` is built in.
MEMORY_METHODS: Registry[MethodSpec] = Registry("memory method", groups={"amd.memory_methods": {}},
                                                check=lambda found: isinstance(found, MethodSpec),
                                                expected="its spec (amd.api.MethodSpec)")
MEMORY_METHODS.add("amd", "amd.memory.amd_method.spec:SPEC")
# The paper's Table 1 baselines (their specs say where the AMD authors' release has their code).
MEMORY_METHODS.add("reasoningbank", "amd.memory.baseline_specs:REASONINGBANK")
MEMORY_METHODS.add("memp", "amd.memory.baseline_specs:MEMP")
MEMORY_METHODS.add("sasm", "amd.memory.baseline_specs:SASM")

# Who writes memory: `rules` (deterministic, model-free) or any model spec (amd.llm.specs).
WRITERS: Registry[Callable[..., Any]] = Registry("memory writer")
WRITERS.add("rules", "amd.memory.writing:RulesWriter")
WRITERS.add("model", "amd.memory.writing:ModelWriter")

# Embedders by the kind before the colon of their spec (local:all-minilm-l6-v2, openai:MODEL, hash:DIM).
EMBEDDERS: Registry[Callable[..., Any]] = Registry("embedder")
EMBEDDERS.add("local", "amd.memory.embed:LocalMiniLM", example="local:all-minilm-l6-v2")
EMBEDDERS.add("openai", "amd.memory.embed:OpenAIEmbedder", example="openai:text-embedding-3-small")
EMBEDDERS.add("hash", "amd.memory.embed:HashEmbedder", example="hash:DIM (tests only)")

# Tables and figures of `amd table` / `amd figure` and of the workflow's `outputs`; a memory method's own tables come
# from its spec (meta `method`); installed packages add tables and figures under `amd.tables` and `amd.figures`.
OUTPUTS: Registry[Callable[..., Any]] = Registry("output", groups={"amd.tables": {"kind": "table"},
                                                                   "amd.figures": {"kind": "figure"}})
for _table in ("table1_main", "table2_ablation", "table3_teacher", "table5_repeats", "table6_protocols"):
    OUTPUTS.add(_table, f"amd.analysis.tables:{_table}", kind="table")
# Beyond the paper's tables: each task with and without memory, and an exact sign test on the pairs.
OUTPUTS.add("paired_tasks", "amd.analysis.paired:paired_tasks", kind="table")
OUTPUTS.add("security_pairs", "amd.analysis.paired:security_pairs", kind="table")
# Several teachers: single-teacher memory beside a bank pooled from several (amd memory pool).
OUTPUTS.add("table_multi_teacher", "amd.analysis.teachers:table_multi_teacher", kind="table")
# Beyond the paper: the teacher-student fit probe, ranked and checked against the grid where it has run.
OUTPUTS.add("probe_fit", "amd.analysis.teachers:probe_fit", kind="table")
# What retrieval saw per memory type: queries that δ left with no entry, the similarities of what was injected.
OUTPUTS.add("retrieval_delta", "amd.analysis.tables:retrieval_delta", kind="table")
for _figure in ("fig3_steps", "fig4_student_size", "fig5_k_sweep"):
    OUTPUTS.add(_figure, f"amd.analysis.figures:{_figure}", kind="figure")


def _method_tables() -> Iterable[tuple[str, str, dict[str, Any]]]:
    for entry in MEMORY_METHODS.entries():
        spec = MEMORY_METHODS.load(entry.name)
        for name, target in spec.tables.items():
            yield name, target, {"kind": "table", "method": spec.name}


OUTPUTS.add_source(_method_tables)


def create_benchmark(name: str, **options: Any) -> "Benchmark":
    """A benchmark object by its registered name (options are the benchmark's own, e.g. a suite)."""
    return BENCHMARKS.load(name)(**options)
