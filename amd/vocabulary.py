"""The words every layer shares, defined once: memory types, memory configs, protocols, tables and figures.

AMD's own memory types and configs are defined here; a memory method registered in `amd.registry` brings its
types and configs in its registry entry, and the functions below collect them. The command line, the config
schema (`amd.workflow.config`), the Snakemake rules and the analysis all take their choices from this module.
"""

from dataclasses import dataclass

from amd.errors import AmdError, did_you_mean


@dataclass(frozen=True)
class MemoryType:
    code: str  # short name in flags, config keys and result paths: --k wf=1, k_wf1_st1
    name: str  # the name entries and injection records carry: "workflow"
    embedded: str  # the entry field whose embedding is stored (and searched, unless looked up by name)
    lookup: str  # "vector": top-k by cosine to a query; "name": the records of a failing function, ranked by cosine
    default_k: int
    default_delta: float | None  # minimum cosine of a vector search; None: no threshold
    representations: tuple[str, ...] = ()  # renderings the method offers (paper Table 4); () when it has one
    default_representation: str | None = None


@dataclass(frozen=True)
class MemoryConfig:
    name: str
    method: str | None  # the registered memory method; None for zero_shot
    types: tuple[MemoryType, ...]
    # Run options this config stands for (a variant of its method, e.g. gated function memory); options given
    # for a run (amd run --memory-option, the workflow's memory_options) override them.
    options: tuple[tuple[str, str], ...] = ()


ZERO_SHOT = "zero_shot"
REPRESENTATIONS = ("prose", "code")

# The paper's three memories (Section 3.2). δ: the authors' values for text-embedding-3-small (their release).
WORKFLOW = MemoryType("wf", "workflow", embedded="query", lookup="vector", default_k=1, default_delta=0.30,
                      representations=REPRESENTATIONS, default_representation="prose")
SUBTASK = MemoryType("st", "subtask", embedded="description", lookup="vector", default_k=1, default_delta=0.45,
                     representations=REPRESENTATIONS, default_representation="code")
FUNCTION = MemoryType("fn", "function", embedded="reasoning", lookup="name", default_k=1, default_delta=None,
                      representations=REPRESENTATIONS, default_representation="code")
AMD_TYPES = (WORKFLOW, SUBTASK, FUNCTION)
AMD_CONFIGS = {"wf": ("wf",), "wf_st": ("wf", "st"), "wf_st_fn": ("wf", "st", "fn"), "wf_fn": ("wf", "fn"),
               "st_only": ("st",), "fn_only": ("fn",)}
AMD_FULL = "wf_st_fn"  # the paper's AMD row
# Beyond the paper: variants of the full config (run options of amd.memory.amd.retrieval). Checked decomposition:
# 5 sampled decompositions merged by agreement; gated function memory: hints from a function's second error on;
# compressed function memory: one line per function.
AMD_VARIANTS = {
    "wf_st_fn_checked": {"types": ("wf", "st", "fn"), "options": {"decompose_samples": 5}},
    "wf_st_fn_gated": {"types": ("wf", "st", "fn"), "options": {"fn_gate": "repeat"}},
    "wf_st_fn_signature": {"types": ("wf", "st", "fn"), "options": {"representation": "fn=signature"}},
    "wf_st_fn_gated_signature": {"types": ("wf", "st", "fn"),
                                 "options": {"fn_gate": "repeat", "representation": "fn=signature"}},
}

# Beyond the paper: the full config with online memory (amd.memory.amd.online): the bank grows with the student's own
# successes during the run; registered as a variant of AMD in amd.registry.
AMD_ONLINE = {"wf_st_fn_online": {"types": ("wf", "st", "fn"), "options": {"online": True}}}

# How a model agent is prompted (amd run --prompting; amd.agent.agents.ModelAgent): amd, our system prompt; official,
# the benchmark's messages and native tools alone; json, one JSON object per reply, decoded under the tools' schemas.
PROMPTING = ("amd", "official", "json")

# Leakage protocols (paper Appendix B.3; amd.memory.protocols).
SELF_EXCLUDED, CROSS_SPLIT, SHARED = "self_excluded", "cross_split", "shared"
PROTOCOLS = (SELF_EXCLUDED, CROSS_SPLIT, SHARED)


def memory_types() -> dict[str, MemoryType]:
    """Every memory type of every registered method, by code."""
    from amd.registry import MEMORY_METHODS

    types = {}
    for entry in MEMORY_METHODS.entries():
        for memory_type in entry.meta["types"]:
            if types.setdefault(memory_type.code, memory_type) != memory_type:
                raise AmdError(f"memory type code {memory_type.code!r} is declared twice, differently")
    return types


def memory_configs() -> dict[str, MemoryConfig]:
    """zero_shot plus every registered method's named configs."""
    from amd.registry import MEMORY_METHODS

    configs = {ZERO_SHOT: MemoryConfig(ZERO_SHOT, None, ())}
    for entry in MEMORY_METHODS.entries():
        by_code = {t.code: t for t in entry.meta["types"]}
        for name, declared in entry.meta["configs"].items():
            if name in configs:
                raise AmdError(f"memory config {name!r} is declared by two methods")
            codes, options = (declared["types"], declared.get("options", {})) if isinstance(declared, dict) \
                else (declared, {})
            configs[name] = MemoryConfig(name, entry.name, tuple(by_code[code] for code in codes),
                                         tuple(sorted((key, str(value)) for key, value in options.items())))
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


def check_protocol(protocol: str) -> str:
    if protocol not in PROTOCOLS:
        raise AmdError(f"unknown memory protocol {protocol!r}{did_you_mean(protocol, PROTOCOLS)}; "
                       f"allowed: {', '.join(PROTOCOLS)}")
    return protocol


def output_names(kind: str) -> list[str]:
    """Registered tables (kind "table") or figures (kind "figure")."""
    from amd.registry import OUTPUTS

    return [entry.name for entry in OUTPUTS.entries() if entry.meta["kind"] == kind]
