"""The memory-method interface, the machinery every method shares, and opening a bank for a run.

A method (its spec registered in `amd.core.registry`, MEMORY_METHODS) builds its bank from *all* records of a run — it decides
itself which ones to learn from — and at run time offers the hooks of `amd.agent.hooks.MemoryHooks`: task start,
each user turn, after an error, after each finished episode (and at the start and end of the run, for methods
that update memory online: `amd.memory.online`). `BankHooks` gives a method the protocols (never an entry of the
task's own group, or of the task itself under a task-level protocol, unless `shared`), vector search with per-type k
and δ, and injection records (with the source task and group, the leakage audit); over a bank pooled
from several teachers, one teacher's entries per task (amd.memory.pool, run option prefer_teacher).
"""

import logging
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from amd.agent.hooks import MemoryHooks, TaskContext
from amd.benchmarks.base import Benchmark
from amd.core.errors import AmdError
from amd.core.registry import load_target
from amd.core.spec import OptionValue, parse_options
from amd.core.trajectory import InjectionRecord, MemoryQuery, TrajectoryRecord
from amd.core.vocabulary import (
    CROSS_SPLITS,
    EXCLUSION_UNITS,
    PREFER_TEACHER,
    SHARED,
    MemoryConfig,
    check_protocol,
    memory_config,
    memory_type,
    method_spec,
)
from amd.memory.bank import Bank, BankContents, load_bank, rebuild_hint
from amd.memory.embed import get_embedder
from amd.memory.pool import pooled_view
from amd.memory.protocols import Exclusion, exclusion, memory_side, unit_field

if TYPE_CHECKING:  # amd.llm's package imports the openai SDK
    from amd.llm.base import Chat

log = logging.getLogger("amd.memory")


class Writer(Protocol):
    """Who writes memory (amd.memory.writing): `chat` is None for the rules writer (a method's own templates), else
    the writer model's chat (messages -> amd.llm.ChatReply), safe to call from several threads."""

    chat: "Chat | None"

    def describe(self) -> dict[str, Any]: ...

    def usage(self) -> dict[str, int] | None: ...

    def close(self) -> None: ...


Distilled = TypeVar("Distilled")


@dataclass
class BuildContext:
    """What a method's `build` gets beside the records."""

    writer: Writer
    benchmark: Callable[[str], Benchmark]  # benchmark name -> benchmark object (function docs and apps)
    # the build options given (amd memory build --option), parsed by the spec's declarations; absent ones are absent
    options: dict[str, OptionValue] = field(default_factory=dict)
    concurrency: int = 4  # records written at once by a model writer

    def map(self, distill: Callable[[TrajectoryRecord], Distilled],
            records: list[TrajectoryRecord]) -> list[Distilled]:
        """`distill(record)` for every record, in order, with progress; a model writer serves several at once."""
        import sys

        from tqdm import tqdm

        progress = {"desc": "distilling", "unit": "task", "file": sys.stderr, "disable": len(records) < 2,
                    "total": len(records)}
        if self.writer.chat is None:
            return list(tqdm(map(distill, records), **progress))
        with ThreadPoolExecutor(self.concurrency) as pool:
            return list(tqdm(pool.map(distill, records), **progress))


def first_per_task(records: list[dict], what: str = "trajectory") -> list[dict]:
    """The first of `records` per task id, in order; later ones are logged (as a second `what`) and skipped."""
    kept, seen = [], set()
    for record in records:
        if record["task_id"] in seen:
            log.info("%s: skipped a second %s of the same task", record["task_id"], what)
            continue
        seen.add(record["task_id"])
        kept.append(record)
    return kept


@dataclass
class RetrievalSettings:
    """How a run retrieves: its leakage protocol, k and δ per type name, and the method's run options."""

    protocol: str
    k: dict[str, int]  # by type name
    delta: dict[str, float | None]  # by type name; None: no threshold
    split_seed: int = 0
    # the run options given (the config's, then amd run --memory-option), parsed by the spec's declarations
    options: dict[str, OptionValue] = field(default_factory=dict)
    prefer_teacher: str | None = None  # a pooled bank: whose memory a task sees first (amd.memory.pool)
    # task id -> exclusion group now (amd.benchmarks.duplicates), over the groups the bank was built with; None: those
    task_groups: Mapping[str, str] | None = None


class MemoryMethod(Protocol):
    """A memory method: the class its spec's `implementation` names, created without arguments."""

    name: str
    version: str  # recorded in the bank's manifest

    def build(self, records: list[TrajectoryRecord], context: BuildContext) -> BankContents:
        """Entries distilled from `records` (all of a run's records, successes and failures)."""
        ...

    def open(self, bank: Bank, config: MemoryConfig, settings: RetrievalSettings) -> MemoryHooks:
        """The run-time hooks for one memory config over `bank`."""
        ...


class BankHooks(MemoryHooks):
    """Hooks that inject nothing, plus what every method needs; a method overrides the hooks it uses."""

    one_task_at_a_time = False  # a frozen bank: tasks may run in parallel

    def __init__(self, bank: Bank, config: MemoryConfig, settings: RetrievalSettings):
        self.bank, self.config, self.settings = bank, config, settings
        self.types = [t.name for t in config.types]
        self.embedder = get_embedder(bank.manifest["embedder"])
        if self.embedder.dim != bank.manifest["dim"]:
            raise AmdError(f"{bank.path}: {bank.manifest['dim']}-dimensional vectors, but its embedder "
                           f"{self.embedder.spec} gives {self.embedder.dim}; {rebuild_hint(bank.path, bank.manifest)}")
        self.memory_side, self.pool = None, None
        if settings.task_groups is not None:
            self.bank = self.bank.regrouped(settings.task_groups)
        if "pool" in bank.manifest or settings.prefer_teacher is not None:
            self.bank, self.pool = pooled_view(self.bank, settings.prefer_teacher)
        if settings.protocol in CROSS_SPLITS:
            self.memory_side = memory_side(self.bank.manifest["task_groups"], settings.protocol, settings.split_seed)
            self.bank = self.bank.restricted(unit_field(settings.protocol), self.memory_side)

    def describe(self) -> dict[str, Any]:
        """The trajectory's `memory` field; `excluded` says what no task retrieved memory from (the protocol's
        unit: its own group or its own task; none under `shared`)."""
        described: dict[str, Any] = {"config": self.config.name, "method": self.bank.manifest["method"]["name"],
                     "bank": str(self.bank.path), "bank_sha256": self.bank.manifest_sha256,
                     "protocol": self.settings.protocol, "excluded": EXCLUSION_UNITS[self.settings.protocol] or "none",
                     "k": {t: self.settings.k[t] for t in self.types},
                     "delta": {t: self.settings.delta[t] for t in self.types if self.settings.delta[t] is not None}}
        if self.settings.protocol in CROSS_SPLITS:
            described["split_seed"] = self.settings.split_seed
        if self.pool is not None:
            described["pool"] = self.pool
        return described

    def excluded(self, task: TaskContext) -> Exclusion:
        """What this task must not see: entries of its own group, or of itself under a task-level protocol
        (nothing under `shared`)."""
        excluded = exclusion(self.settings.protocol, task.task_id, task.task_group)
        if self.memory_side is not None and excluded.value in self.memory_side:
            raise AmdError(f"task {task.task_id} is on the memory side of the cross split (seed "
                           f"{self.settings.split_seed}); evaluate only the held-out tasks "
                           "(amd.memory.protocols.eval_task_ids)")
        return excluded

    def search(self, type_name: str, query: str, task: TaskContext,
               queries: list[MemoryQuery] | None = None) -> list[tuple[dict, float]]:
        """The top-k entries for `query` at or above δ that the task may see; `queries` (an Injection's) gets
        what the search saw (query_record)."""
        return self.search_vector(type_name, self.embedder.embed_one(query), task, query, queries)

    def search_vector(self, type_name: str, vector, task: TaskContext, query: str,
                      queries: list[MemoryQuery] | None = None) -> list[tuple[dict, float]]:
        """`search` by a query vector (`query`: its text, as recorded)."""
        excluded = self.excluded(task)
        hits = self.bank.search(type_name, vector, self.settings.k[type_name], self.settings.delta[type_name],
                                excluded)
        if queries is not None:
            best = hits or self.bank.search(type_name, vector, 1, None, excluded)  # a miss: how far below δ
            queries.append(query_record(type_name, query, len(hits), best[0][1] if best else None))
        return hits


def injection_records(type_name: str, hits: list[tuple[dict, float]], query: str) -> list[InjectionRecord]:
    """The trajectory's injection records of `hits` (entry, similarity) retrieved for `query`: type, entry id, the
    source task and group (the leakage audit), the source teacher of a pooled bank, similarity, query."""
    records = []
    for entry, score in hits:
        record: InjectionRecord = {"type": type_name, "entry_id": entry["id"], "source_task_id": entry["source_task_id"],
                                   "source_group": entry["source_group"]}
        if "source_teacher" in entry:
            record["source_teacher"] = entry["source_teacher"]
        record["similarity"] = round(float(score), 6)
        record["query"] = query
        records.append(record)
    return records


def query_record(type_name: str, query: str, found: int, best: float | None) -> MemoryQuery:
    """What one retrieval query saw (a trajectory's `memory_queries` item): entries found (at or above δ, at most
    k) and the best similarity among the entries the task may see, below δ alike (None: it may see none)."""
    return {"type": type_name, "query": query, "found": found, "best": None if best is None else round(float(best), 6)}


def open_memory(bank_dir, config_name: str, protocol: str = "self_excluded", k: dict | None = None,
                delta: dict | float | None = None, split_seed: int = 0, options: dict | None = None,
                task_groups: Mapping[str, str] | None = None) -> MemoryHooks | None:
    """The hooks of `config_name` over the bank at `bank_dir`, or None for zero_shot. `k`: per type code or name,
    over the types' defaults; `delta` the same over the δ the bank recorded for its embedder (else the types');
    `task_groups`: the benchmark's exclusion groups now, over the bank's own."""
    config = memory_config(config_name)
    check_protocol(protocol)
    if config.method is None:
        return None
    spec = method_spec(config.method)
    bank = load_bank(bank_dir)
    if not any(bank.entries.values()):
        log.warning("%s holds no memory entries (none of its %d trajectories gave one): memory config %s injects "
                    "nothing here", bank_dir, sum(s["records"] for s in bank.manifest.get("sources", [])), config_name)
    built_by = bank.manifest["method"]["name"]
    if built_by != config.method:
        raise AmdError(f"{bank_dir} was built by memory method {built_by!r}; config {config_name!r} needs a bank "
                       f"of method {config.method!r} (amd memory build --method {config.method})")
    if protocol == SHARED:
        log.warning("memory protocol 'shared': a task may retrieve memory distilled from itself (leaky; the "
                    "paper's main protocol)")
    given = dict(config.options) | dict(options or {})
    prefer_teacher = given.pop(PREFER_TEACHER, None)  # every method's run option (amd.memory.pool)
    parsed = parse_options(spec.name, "run", given, spec.run_options)
    chosen_delta = per_type(bank_delta(bank, delta), config, "delta")
    settings = RetrievalSettings(protocol, per_type(k, config, "k"), chosen_delta, split_seed, parsed, prefer_teacher,
                                 task_groups)
    return method_class(spec.implementation)().open(bank, config, settings)


def bank_delta(bank: Bank, given: dict | float | None) -> dict | float:
    """δ for a run: `given` over the δ the bank recorded for its embedder (`amd memory build`), by type; one number
    given applies to every type."""
    if given is not None and not isinstance(given, dict):
        return given  # one number (per_type checks it)
    return dict(bank.manifest.get("delta", {})) | (given or {})


def method_class(implementation: str) -> type[MemoryMethod]:
    """The class a spec's `implementation` ("module:Class") names."""
    found = load_target(implementation)
    if not isinstance(found, type):
        raise AmdError(f"memory method implementation {implementation} is not a class")
    return found


def per_type(given, config: MemoryConfig, what: str) -> dict:
    """Values by type name for the config's types: the types' defaults, overridden by `given` — one number for
    every type, or a dict by type code or name. A value for another type of the same method is allowed and
    unused; any other type is an error."""
    chosen = {t.name: t.default_k if what == "k" else t.default_delta for t in config.types}
    if isinstance(given, (int, float)) and not isinstance(given, bool):
        given = dict.fromkeys(chosen, given)
    assert config.method is not None  # zero_shot has no types to choose among
    method_types = {t.name for t in method_spec(config.method).types}
    for key, value in (given or {}).items():
        name = memory_type(key).name
        if name not in method_types:
            raise AmdError(f"memory {what} for {key}: method {config.method} has no such type")
        if what == "k" and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise AmdError(f"memory k for {key} must be a whole number ≥ 1, got {value!r}")
        if name in chosen:
            chosen[name] = value
    return chosen
