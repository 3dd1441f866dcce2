"""The words every layer shares, defined once: memory types, memory configs and options (from the registered
methods' specs), protocols, tables and figures.

A memory method brings its types, configs and options in its spec (`amd.core.spec.MethodSpec`, registered in
`amd.core.registry`); the functions below collect them. The command line, the config schema (`amd.workflow.config`), the
Snakemake rules and the analysis take their choices from this module, and none of them names a method's words.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from amd.core.errors import AmdError, did_you_mean
from amd.core.registry import MEMORY_METHODS, OUTPUTS
from amd.core.spec import MemoryType, MethodSpec, Option, Setting


@dataclass(frozen=True)
class MemoryConfig:
    """A memory config a run names (`amd run --memory-config`): its method, the method's types it uses and the run
    options it stands for; zero_shot has no method."""

    name: str
    method: str | None  # the registered memory method; None for zero_shot
    types: tuple[MemoryType, ...]
    # Run options this config stands for (a variant of its method, e.g. gated function memory); options given
    # for a run (amd run --memory-option, the workflow's memory_options) override them.
    options: tuple[tuple[str, str], ...] = ()
    after: str | None = None  # the config of the same cell whose run goes first (the method's spec says)


ZERO_SHOT = "zero_shot"
# Every method's run option over a bank pooled from several teachers: whose memory a task sees first (amd.memory.pool).
PREFER_TEACHER = "prefer_teacher"

# How a model agent is prompted (amd run --prompting; amd.agent.agents.ModelAgent): amd, our system prompt; official,
# the benchmark's messages and native tools alone; json, one JSON object per reply, decoded under the tools' schemas.
PROMPTING = ("amd", "official", "json")
# How a model agent shows retrieved memory (amd run --memory-framing; amd.agent.hooks.as_retrieved_memory): labelled,
# delimited and labelled as data, never instructions (ours); bare, the text alone, as the paper's releases inject it.
MEMORY_FRAMINGS = ("labelled", "bare")
# The agent's params recorded only where they differ from these (amd run --prompting, --think, --memory-framing;
# amd.core.trajectory.recorded): the runs made before the options existed hold none of them.
AGENT_PARAM_DEFAULTS: dict[str, Any] = {"prompting": PROMPTING[0], "think": False,
                                        "memory_framing": MEMORY_FRAMINGS[0]}

# Leakage protocols (paper Appendix B.3; amd.memory.protocols), each with its exclusion unit: what no task retrieves
# memory from. GROUP: its own group (the task and its variants; our stricter default); TASK: only the task itself
# (the paper's unit, B.3); None: nothing (`shared`, the paper's main results). A cross split holds out 30 % of the units.
SELF_EXCLUDED, SELF_EXCLUDED_TASK = "self_excluded", "self_excluded_task"
CROSS_SPLIT, CROSS_SPLIT_TASK = "cross_split", "cross_split_task"
SHARED = "shared"
GROUP, TASK = "group", "task"
EXCLUSION_UNITS = {SELF_EXCLUDED: GROUP, SELF_EXCLUDED_TASK: TASK, CROSS_SPLIT: GROUP, CROSS_SPLIT_TASK: TASK,
                   SHARED: None}
PROTOCOLS = tuple(EXCLUSION_UNITS)
CROSS_SPLITS = (CROSS_SPLIT, CROSS_SPLIT_TASK)


def method_spec(name: str) -> MethodSpec:
    spec = MEMORY_METHODS.load(name)
    if spec.name != name:
        raise AmdError(f"memory method {name!r}: its registry entry must name its spec (amd.core.spec.MethodSpec of that "
                       f"name), got {spec!r}")
    return spec


def run_method(memory: Mapping[str, Any]) -> MethodSpec | None:
    """The spec of the method behind a run's memory setting (the trajectory's `memory`); None for zero-shot or a
    method not registered here."""
    config = memory_configs().get(memory["config"])
    method = memory.get("method") or (config.method if config else None)
    return method_spec(method) if method in MEMORY_METHODS.names() else None


def method_specs() -> list[MethodSpec]:
    return [method_spec(name) for name in MEMORY_METHODS.names()]


def memory_types() -> dict[str, MemoryType]:
    """Every memory type of every registered method, by code."""
    types: dict[str, Any] = {}
    for spec in method_specs():
        for memory_type in spec.types:
            if types.setdefault(memory_type.code, memory_type) != memory_type:
                raise AmdError(f"memory type code {memory_type.code!r} is declared twice, differently")
    return types


def memory_configs() -> dict[str, MemoryConfig]:
    """zero_shot plus every registered method's named configs."""
    return dict(_configs(tuple(method_specs())))


@lru_cache(maxsize=4)
def _configs(specs: tuple[MethodSpec, ...]) -> dict[str, MemoryConfig]:
    configs = {ZERO_SHOT: MemoryConfig(ZERO_SHOT, None, ())}
    for spec in specs:
        by_code = {t.code: t for t in spec.types}
        for name, declared in spec.named_configs().items():
            if name in configs:
                raise AmdError(f"memory config {name!r} is declared by two methods")
            configs[name] = MemoryConfig(name, spec.name, tuple(by_code[code] for code in declared.types),
                                         tuple(sorted((key, str(value)) for key, value in declared.options.items())),
                                         declared.after)
    return configs


def memory_config(name: str) -> MemoryConfig:
    configs = memory_configs()
    if name not in configs:
        raise AmdError(f"unknown memory config {name!r}{did_you_mean(name, configs)}; allowed: {', '.join(configs)}")
    return configs[name]


def plain_config(name: str) -> str | None:
    """The config a variant varies (same method and types, no options); None for a config without options."""
    config = memory_config(name)
    if not config.options:
        return None
    return next((other.name for other in memory_configs().values()
                 if other.method == config.method and other.types == config.types and not other.options), None)


def memory_type(code_or_name: str) -> MemoryType:
    """A type by its code (wf) or its name (workflow)."""
    types = memory_types()
    by_name = {t.name: t for t in types.values()}
    found = types.get(code_or_name) or by_name.get(code_or_name)
    if found is None:
        raise AmdError(f"unknown memory type {code_or_name!r}{did_you_mean(code_or_name, [*types, *by_name])}; "
                       f"types: {', '.join(types)}")
    return found


def option_flags() -> dict[str, tuple[str, Option]]:
    """Run options with a flag of their own in `amd run` (flag -> (option name, option)), from every method."""
    flags: dict[str, Any] = {}
    for spec in method_specs():
        for name, option in spec.run_options.items():
            if option.flag and flags.setdefault(option.flag, (name, option))[0] != name:
                raise AmdError(f"amd run {option.flag}: two memory methods give the flag to different options")
    return flags


def bank_settings() -> list[Setting]:
    """Every method's settings (build options the workflow varies), one per key."""
    found: dict[str, Any] = {}
    for spec in method_specs():
        for setting in spec.settings:
            if found.setdefault(setting.key, setting) != setting:
                raise AmdError(f"setting {setting.key!r} is declared by two methods, differently")
    return list(found.values())


def proposed_config() -> str | None:
    """The config of the paper's method that Tables 1 and 3 and Figures 3-4 show (its spec: `proposed`)."""
    for spec in method_specs():
        if spec.proposed and spec.table1_configs():
            return spec.table1_configs()[0]
    return None


def check_protocol(protocol: str) -> str:
    if protocol not in PROTOCOLS:
        raise AmdError(f"unknown memory protocol {protocol!r}{did_you_mean(protocol, PROTOCOLS)}; "
                       f"allowed: {', '.join(PROTOCOLS)}")
    return protocol


def output_names(kind: str) -> list[str]:
    """Registered tables (kind "table") or figures (kind "figure")."""
    return [entry.name for entry in OUTPUTS.entries() if entry.meta["kind"] == kind]
