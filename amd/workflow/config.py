"""The workflow's config: the files it is merged from, its schema (completed from the vocabulary and the
registries), and checking a config with it.

`active_config` layers the config files: config/base.yaml, then the embedded default (config/config.yaml) unless
the --configfile files give a `name` of their own, then those files. `config.schema.yaml` holds the structure; the
names that plug-ins add (benchmarks, memory methods and their configs, types and run options, protocols, outputs,
agent/writer/embedder spec kinds) and the sections of the methods' settings are filled in here when it is loaded, so
the schema can never disagree with `amd.core.vocabulary` or `amd.core.registry`.
"""

import copy
import functools
import math
import operator
import re
from functools import cache
from importlib import resources
from pathlib import Path

import jsonschema
import yaml

from amd.core.registry import AGENTS, BENCHMARKS, EMBEDDERS, MEMORY_METHODS, OUTPUTS
from amd.core.vocabulary import (
    MEMORY_FRAMINGS,
    PREFER_TEACHER,
    PROMPTING,
    PROTOCOLS,
    bank_settings,
    memory_configs,
    memory_types,
    method_specs,
)
from amd.llm.specs import MODEL_FORMS, MODEL_KINDS
from amd.workflow.config_errors import in_words, shown

CONFIG_DIR = Path("config")  # the workflow's config files, relative to the workflow's folder
BASE_FILE = "base.yaml"  # what every config starts from
DEFAULT_FILE = "config.yaml"  # the embedded default, for a config without a name of its own
DEFAULT_NAME = "default"  # a config without a `name` is the embedded default (tweaked)
MAX_VALUES = 100_000  # values in a config, aliases expanded (the paper's grid has about 2,000)
MAX_TEXT = 10_000  # characters of any one text value (each may become a command-line argument of a job)
MAX_DEPTH = 64  # levels of nesting (the paper's grid has 7)


class ConfigError(Exception):
    """A config value the workflow cannot use; the message names the key."""


def active_config(overlay: dict, folder: Path = CONFIG_DIR) -> dict:
    """The config a run of the workflow uses: folder/base.yaml, then folder/config.yaml (the embedded default) unless
    `overlay` (the --configfile files, merged as Snakemake merges them) has a `name` of its own, then `overlay`.
    A missing file counts as empty (a workflow folder of one's own may hold only config.yaml)."""
    default = read_config(folder / DEFAULT_FILE)
    layers = [read_config(folder / BASE_FILE), *([default] if _builds_on_default(overlay, default) else []), overlay]
    return functools.reduce(merge_configs, layers, {})


def config_files(overlay: dict, overlay_files: list[str], folder: Path = CONFIG_DIR) -> list[str]:
    """The files `active_config` layers, in order: base.yaml, the embedded default where the overlay builds on it,
    then the --configfile files."""
    default = read_config(folder / DEFAULT_FILE)
    ours = [folder / BASE_FILE, *([folder / DEFAULT_FILE] if _builds_on_default(overlay, default) else [])]
    return [str(path) for path in ours] + [str(path) for path in overlay_files]


def _builds_on_default(overlay: dict, default: dict) -> bool:
    """Whether the --configfile files tweak the embedded default (no `name` of their own) or start clean."""
    if "name" in overlay and overlay["name"] is None:
        raise ConfigError("config: name: null cannot remove the name: give your config a name of its own, or leave "
                          "`name` out to tweak the embedded default")
    return overlay.get("name", default.get("name")) == default.get("name")


def read_config(path: Path) -> dict:
    """A YAML config file's mapping; {} where there is no such file."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as error:
        raise ConfigError(f"config file {path}: cannot read it: {error.strerror}") from None
    try:
        config = yaml.load(text, Loader=StrictLoader) or {}  # a SafeLoader: safe_load's constructors
    except yaml.YAMLError as error:
        raise ConfigError(f"config file {path}: not YAML: {' '.join(str(error).split())}") from None
    except RecursionError:
        raise ConfigError(f"config file {path}: nests deeper than it can be read (a config nests a few levels)") \
            from None
    except ConfigError as error:
        raise ConfigError(f"config file {path}: {error}") from None
    if not isinstance(config, dict):
        raise ConfigError(f"config file {path}: a mapping of keys is expected, not {type(config).__name__}")
    check_values(config, f"config file {path}")
    return config


class StrictLoader(yaml.SafeLoader):
    """yaml.safe_load that refuses a key given twice in one mapping (YAML keeps the last one, silently)."""

    def construct_mapping(self, node, deep=False):
        lines: dict = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                continue
            key = self.construct_object(key_node)
            line = key_node.start_mark.line + 1
            if key in lines:
                raise ConfigError(f"key {shown(key)} is given twice in one mapping (lines {lines[key]} and {line}); "
                                  "keep one")
            lines[key] = line
        return super().construct_mapping(node, deep=deep)


def check_values(config, where: str = "config") -> None:
    """Refuse, before any schema check formats a value: a config that expands past MAX_VALUES values (YAML aliases
    repeat what they name, so a few hundred bytes can nest billions: an alias bomb), one that contains itself, a
    NaN or infinity anywhere (every bound check passes NaN), a text longer than MAX_TEXT and nesting deeper than
    MAX_DEPTH. Each container is walked once."""
    sizes: dict[int, int] = {}

    def size(value, path: tuple) -> int:
        def refuse(problem: str):
            return ConfigError(f"{where}: {'.'.join(map(str, path)) or '(top level)'}: {problem}")

        if isinstance(value, float) and not math.isfinite(value):
            raise refuse(f"{value} is not a number a config can use (NaN or infinite)")
        if isinstance(value, str) and len(value) > MAX_TEXT:
            raise refuse(f"a text of {len(value):,} characters, more than the {MAX_TEXT:,} any value may have")
        if not isinstance(value, (dict, list)):
            return 1
        if len(path) > MAX_DEPTH:
            raise refuse(f"nests more than {MAX_DEPTH} levels deep; a config is far flatter")
        if sizes.get(id(value)) == -1:
            raise refuse("contains itself (an alias of a key that encloses it)")
        if id(value) not in sizes:
            sizes[id(value)] = -1
            items = value.items() if isinstance(value, dict) else enumerate(value)
            sizes[id(value)] = 1 + sum(size(item, (*path, key)) for key, item in items)
            if sizes[id(value)] > MAX_VALUES:
                raise refuse(f"expands to more than {MAX_VALUES:,} values (YAML aliases repeat what they name); "
                             "a config is far smaller")
        return sizes[id(value)]

    size(config, ())


def _alternatives(words) -> str:
    return "|".join(re.escape(word) for word in words)


@cache
def config_schema() -> dict:
    schema = yaml.safe_load(resources.files("amd.workflow").joinpath("config.schema.yaml").read_text("utf-8"))
    defs = schema["$defs"]
    types = memory_types().values()
    model_free = [entry.name for entry in AGENTS.entries() if entry.name != "model"]
    model = rf"(?:{_alternatives(MODEL_KINDS)}):.+"
    defs["benchmark"]["enum"] = BENCHMARKS.names()
    defs["memory_config"]["enum"] = list(memory_configs())
    defs["memory_method"]["enum"] = MEMORY_METHODS.names()
    defs["memory_type"]["enum"] = [t.code for t in types]
    defs["protocol"]["enum"] = list(PROTOCOLS)
    defs["prompting"]["enum"] = list(PROMPTING)
    defs["memory_framing"]["enum"] = list(MEMORY_FRAMINGS)
    defs["output"]["enum"] = OUTPUTS.names()
    defs["agent_spec"]["pattern"] = rf"^(?:{_alternatives(model_free)}|{model})$"
    defs["agent_spec"]["forms"] = [*model_free, *MODEL_FORMS]
    defs["writer_spec"]["pattern"] = rf"^(?:rules|{model})$"
    defs["writer_spec"]["forms"] = ["rules", *MODEL_FORMS]
    defs["embedder_spec"]["pattern"] = rf"^(?:{_alternatives(EMBEDDERS.names())}):.+$"
    defs["embedder_spec"]["forms"] = [f"{kind}:NAME" for kind in EMBEDDERS.names()]
    _add_memory_options(schema["properties"]["defaults"]["properties"]["memory_options"])
    _add_benchmark_harness(schema)
    _add_variant_options(schema)
    _add_settings(schema)
    return schema


def _add_benchmark_harness(schema: dict) -> None:
    """A benchmark's own `run` keys (those of the `run` section, none required), run options (as under
    defaults.memory_options) and build options per method (each of its spec's type)."""
    entry = schema["properties"]["benchmarks"]["additionalProperties"]["properties"]
    run = {key: value for key, value in schema["properties"]["run"].items() if key != "required"}
    entry["run"] = run | entry["run"]
    entry["memory_options"] = schema["properties"]["defaults"]["properties"]["memory_options"] | entry["memory_options"]
    entry["build_options"] |= {"type": "object", "propertyNames": {"$ref": "#/$defs/memory_method"}, "properties": {
        spec.name: {"type": "object", "additionalProperties": False,
                    "description": f"build options of the memory method {spec.name}", "properties": {
            name: option.schema() for name, option in spec.build_options.items() if name not in _setting_options(spec)}}
        for spec in method_specs()}}


def _add_variant_options(schema: dict) -> None:
    """A harness variant's run options, for all benchmarks and per benchmark, as under defaults.memory_options."""
    memory_options = schema["properties"]["defaults"]["properties"]["memory_options"]
    variant = schema["properties"]["variants"]["additionalProperties"]["properties"]
    for entry in (variant, variant["benchmarks"]["additionalProperties"]["properties"]):
        entry["memory_options"] = memory_options | entry["memory_options"]


def _setting_options(spec) -> set[str]:
    """Build options the grid varies as settings (their values come from a config section, never a fixed one)."""
    return {setting.option for setting in spec.settings}


def _add_memory_options(memory_options: dict) -> None:
    """Each method's run options, of the kind its spec gives (and the pooled banks' option every method has)."""
    memory_options["properties"] = {
        spec.name: {"type": "object", "additionalProperties": False,
                    "description": f"run options of the memory method {spec.name}",
                    "properties": {name: option.schema() for name, option in spec.run_options.items()}
                    | {PREFER_TEACHER: {"type": "string",
                                        "description": "a pooled bank: the teacher whose memory a task sees first"}}}
        for spec in method_specs()}


def _add_settings(schema: dict) -> None:
    """A section of named values per setting (a build option the grid varies), a default and experiments' lists."""
    experiment = schema["properties"]["experiments"]["additionalProperties"]["properties"]
    for setting in bank_settings():
        schema["properties"][setting.section] = {
            "type": "object", "minProperties": 1, "propertyNames": {"$ref": "#/$defs/name"},
            "additionalProperties": setting.schema,
            "description": f"Named values of the build option {setting.option} (a cell's `{setting.key}`)"}
        schema["properties"]["defaults"]["properties"][setting.key] = {"$ref": "#/$defs/name"}
        experiment[setting.section] = {"$ref": "#/$defs/names", "description": f"the {setting.section} its banks use"}


def _whole_match(validator, pattern: str, instance, schema):
    """JSON Schema's `pattern`, matched against the whole string: Python's `$` also matches before a final newline,
    so "name\\n" would pass "^[A-Za-z0-9_]+$"."""
    if validator.is_type(instance, "string") and not re.fullmatch(pattern, instance):
        yield jsonschema.ValidationError(f"{shown(instance)} does not match {pattern!r}")


ConfigValidator = jsonschema.validators.extend(jsonschema.Draft202012Validator, {"pattern": _whole_match})


def without_nulls(config: dict) -> dict:
    """The config less every key set to null where null is not one of the key's values: a null in a --configfile
    removes what the key inherited (an experiment, an agent's `serve`), while `teacher_tasks: null` (every task) or
    an agent's `temperature: null` (not sent) keep their meaning."""
    pruned = copy.deepcopy(config)
    validator = ConfigValidator(config_schema())
    for error in list(validator.iter_errors(pruned)):
        path = list(error.absolute_path)
        if error.instance is None and path:
            parent = functools.reduce(operator.getitem, path[:-1], pruned)
            if isinstance(parent, dict):
                parent.pop(path[-1], None)
    return pruned


def with_likes(config: dict) -> dict:
    """Each agent with `like: NAME` made NAME's entry (as the merged config has it) with its own keys over it, so a
    twin follows what an overlay changes of the agent it is like (e.g. a sampled twin of a student pointed at an
    endpoint)."""
    resolved = dict(config)
    for section in ("teachers", "students"):
        agents = dict(resolved.get(section) or {})
        for name, entry in agents.items():
            if isinstance(entry, dict) and "like" in entry:
                like = entry["like"]
                base = (resolved.get("teachers") or {}).get(like) or (resolved.get("students") or {}).get(like)
                if not isinstance(base, dict) or "like" in base:
                    raise ConfigError(f"config: {section}.{name}.like: {like!r} is no agent without a `like` of its "
                                      "own")
                agents[name] = merge_configs(base, {key: value for key, value in entry.items() if key != "like"})
        resolved[section] = agents
    return resolved


def validate_config(config: dict) -> None:
    """Raise ConfigError naming the key of the most relevant schema violation, in words (config_errors)."""
    error = jsonschema.exceptions.best_match(ConfigValidator(config_schema()).iter_errors(config))
    if error is not None:
        where = ".".join(str(part) for part in error.absolute_path)
        raise ConfigError(f"config: {where + ': ' if where else ''}{in_words(error)}")


def merge_configs(base: dict, over: dict) -> dict:
    """`over` merged into `base` as Snakemake merges a --configfile into the Snakefile's: nested mappings key by
    key, any other value replaced."""
    merged = dict(base)
    for key, value in over.items():
        both = isinstance(value, dict) and isinstance(base.get(key), dict)
        merged[key] = merge_configs(base[key], value) if both else value
    return merged
