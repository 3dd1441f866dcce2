"""The checked config as typed values, one frozen model per section the grid reads, built once (`sections`) from
the config amd.workflow.config has validated against its schema: the grid's code reads attributes, never string
keys. The schema stays the one place that checks values and words the errors; these models only give them a type.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from amd.workflow.args import RUN_FLAGS
from amd.workflow.config import merge_configs

PerType = Mapping[str, Any]  # a value per memory type code: k (int) or δ (float)
Options = Mapping[str, Mapping[str, Any]]  # options per memory method


@dataclass(frozen=True)
class AgentBenchmark:
    """An agent's own tasks (None: the benchmark's for the role) and options on one benchmark."""

    tasks: list[str] | None
    options: Mapping[str, Any]


@dataclass(frozen=True)
class Agent:
    """A teacher or student: its spec, its `serve` block (None: not served by the workflow), its own `run` settings
    and its own tasks and options per benchmark."""

    spec: str
    serve: Mapping[str, Any] | None
    run: Mapping[str, Any]
    benchmarks: Mapping[str, AgentBenchmark]


@dataclass(frozen=True)
class Benchmark:
    """A benchmark's task lists per role (None: every task), its options, and its harness over the config's values."""

    teacher_tasks: list[str] | None
    student_tasks: list[str] | None
    options: Mapping[str, Any]
    run: Mapping[str, Any]
    memory_options: Options
    build_options: Options
    k: PerType
    delta: PerType


@dataclass(frozen=True)
class Harness:
    """A harness variant's k, δ and run options (for every benchmark, or one; empty for the release's harness)."""

    k: PerType
    delta: PerType
    memory_options: Options


RELEASE_HARNESS = Harness(k={}, delta={}, memory_options={})


@dataclass(frozen=True)
class Variant:
    """A harness variant: its values for every benchmark (`every`) and a benchmark's own over them."""

    every: Harness
    benchmarks: Mapping[str, Harness]

    def harness(self, benchmark: str) -> Harness:
        own = self.benchmarks.get(benchmark, RELEASE_HARNESS)
        return Harness(k=dict(self.every.k) | dict(own.k), delta=dict(self.every.delta) | dict(own.delta),
                       memory_options=merge_configs(dict(self.every.memory_options), dict(own.memory_options)))


@dataclass(frozen=True)
class Pool:
    """A pooled teacher: its members, in order, and the one moved to the front (`prefer`), if any."""

    teachers: list[str]
    prefer: str | None


@dataclass(frozen=True)
class Defaults:
    """A cell's settings where an experiment lists none: one value per cell key (`cell`, e.g. teacher), the seeds,
    k and δ per type, the split seed of a cross split and run options per method."""

    cell: Mapping[str, Any]
    seeds: list[int]
    k: PerType
    delta: PerType
    split_seed: int
    memory_options: Options


@dataclass(frozen=True)
class Experiment:
    """An experiment: its lists by config section (`lists`, e.g. "teachers"), the k values it varies, whether it
    is a probe or on demand, its harness variant and its outputs."""

    lists: Mapping[str, list]
    vary_k: list[int]
    probe: bool
    on_demand: bool
    variant: str | None
    outputs: list[str]


@dataclass(frozen=True)
class Probe:
    """The probe set: `size` tasks drawn by `seed`, or a fixed list per benchmark (`tasks`)."""

    size: int
    seed: int
    tasks: Mapping[str, list[str]]


@dataclass(frozen=True)
class Sections:
    """The config's sections the grid reads (amd.workflow.grid.Grid.sections)."""

    name: str | None  # None: the embedded default (tweaked)
    note: str
    release: str | None
    run: Mapping[str, Any]
    agents: Mapping[str, Agent]
    writers: Mapping[str, str]  # `writers` entries: name -> spec
    embedders: Mapping[str, str]  # name -> spec
    embedder_delta: Mapping[str, PerType]
    benchmarks: Mapping[str, Benchmark]
    variants: Mapping[str, Variant]
    pools: Mapping[str, Pool]
    defaults: Defaults
    experiments: Mapping[str, Experiment]
    probe: Probe | None


EXPERIMENT_KEYS = ("vary_k", "probe", "on_demand", "variant", "outputs", "config", "measured")
DEFAULTS_KEYS = ("seeds", "k", "delta", "split_seed", "memory_options")


def sections(config: Mapping[str, Any]) -> Sections:
    """The typed sections of a config its schema has checked (its experiments already this config's own)."""
    defaults = config["defaults"]
    return Sections(
        name=config.get("name"), note=config.get("note", ""), release=config.get("release"),
        run=config["run"],
        agents={name: _agent(entry) for name, entry in (config["teachers"] | config["students"]).items()},
        writers={name: entry["spec"] for name, entry in config["writers"].items()},
        embedders={name: entry["spec"] for name, entry in config["embedders"].items()},
        embedder_delta={name: entry.get("delta", {}) for name, entry in config["embedders"].items()},
        benchmarks={name: _benchmark(entry) for name, entry in config["benchmarks"].items()},
        variants={name: Variant(_harness(entry), {benchmark: _harness(own) for benchmark, own in
                                                  entry.get("benchmarks", {}).items()})
                  for name, entry in config.get("variants", {}).items()},
        pools={name: Pool(entry["teachers"], entry.get("prefer"))
               for name, entry in config.get("teacher_pools", {}).items()},
        defaults=Defaults(cell={key: value for key, value in defaults.items() if key not in DEFAULTS_KEYS},
                          seeds=defaults["seeds"], k=defaults["k"], delta=defaults["delta"],
                          split_seed=defaults["split_seed"], memory_options=defaults.get("memory_options", {})),
        experiments={name: _experiment(spec) for name, spec in config["experiments"].items()},
        probe=Probe(config["probe"]["size"], config["probe"]["seed"], config["probe"].get("tasks", {}))
        if "probe" in config else None)


def _agent(entry: Mapping[str, Any]) -> Agent:
    return Agent(spec=entry["spec"], serve=entry.get("serve"),
                 run={key: value for key, value in entry.items() if key in RUN_FLAGS},
                 benchmarks={name: AgentBenchmark(own.get("tasks"), own.get("options", {}))
                             for name, own in entry.get("benchmarks", {}).items()})


def _harness(entry: Mapping[str, Any]) -> Harness:
    return Harness(k=entry.get("k", {}), delta=entry.get("delta", {}), memory_options=entry.get("memory_options", {}))


def _benchmark(entry: Mapping[str, Any]) -> Benchmark:
    return Benchmark(teacher_tasks=entry.get("teacher_tasks"), student_tasks=entry.get("student_tasks"),
                     options=entry.get("options", {}), run=entry.get("run", {}),
                     memory_options=entry.get("memory_options", {}), build_options=entry.get("build_options", {}),
                     k=entry.get("k", {}), delta=entry.get("delta", {}))


def _experiment(spec: Mapping[str, Any]) -> Experiment:
    return Experiment(lists={key: value for key, value in spec.items() if key not in EXPERIMENT_KEYS},
                      vary_k=spec.get("vary_k", []), probe=spec.get("probe", False),
                      on_demand=spec.get("on_demand", False), variant=spec.get("variant"), outputs=spec["outputs"])
