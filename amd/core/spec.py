"""What a memory method declares about itself, beside its code: its `MethodSpec`.

A spec is a small module-level constant (amd/methods/amd/spec.py is AMD's) that imports nothing heavy, so listing
every method's types, configs and options costs no import of the methods themselves. amd/plugins.toml names each
spec (or an installed package declares it under the entry point group `amd.memory_methods`); `amd.core.vocabulary`
collects them, and the command line, the config schema, the workflow and the analysis ask them instead of naming
a method, an option or a config.
"""

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from amd.core.errors import AmdError

KINDS = ("bool", "int", "number", "text")


@dataclass(frozen=True)
class MemoryType:
    """One kind of entry a method's bank holds (AMD's: workflow, subtask, function)."""

    code: str  # short name in flags, config keys and result paths: --k wf=1, k_wf1_st1
    name: str  # the name entries and injection records carry: "workflow"
    embedded: str  # the entry field whose embedding is stored (and searched, unless looked up by name)
    # How the method finds entries of this type, in words for readers (AMD's: "vector", top-k by cosine to a query;
    # "name", the records of a failing function ranked by cosine); amd itself does not read it.
    lookup: str
    default_k: int
    default_delta: float | None  # minimum cosine of a vector search; None: no threshold


OptionValue = bool | int | float | str  # an option's value once parsed: by its kind, bool, int, float or str


@dataclass(frozen=True)
class Option:
    """A build option (`amd memory build --option KEY=VALUE`) or run option (`amd run --memory-option KEY=VALUE`,
    the config's `defaults.memory_options`) of a method. amd parses every given value once, from text or from a
    config's value, by `kind` and within the bounds (`parse`): a method receives bool, int, float or str values,
    and only the options that were given (it supplies its own defaults). The config schema checks the same."""

    kind: str  # bool, int, number or text
    help: str
    choices: tuple[str, ...] = ()  # text: the values allowed, in lower case (none: any)
    minimum: float | None = None
    maximum: float | None = None
    flag: str | None = None  # a bool run option with a flag of its own in `amd run`: FLAG is KEY=true

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"option kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.flag is not None and self.kind != "bool":
            raise ValueError(f"option flag {self.flag}: only a bool option has a flag of its own")

    def schema(self) -> dict[str, Any]:
        """The JSON schema of the option's value in a config."""
        schema: dict[str, Any] = {
            "type": {"bool": "boolean", "int": "integer", "number": "number", "text": "string"}[self.kind],
            "description": self.help}
        if self.choices:
            schema["enum"] = list(self.choices)
        if self.minimum is not None:
            schema["minimum"] = self.minimum
        if self.maximum is not None:
            schema["maximum"] = self.maximum
        return schema

    def parse(self, value: object, name: str, where: str = "memory") -> OptionValue:
        """`value` (text, or a config's value) as this option's kind; AmdError "WHERE option NAME must be ..." when
        it is not one, or lies outside the choices or bounds."""
        parsed = _PARSERS[self.kind](value)
        if self.kind == "text" and self.choices:
            parsed = str(parsed).strip().lower()
        if parsed is None or (self.choices and parsed not in self.choices) or not self._within(parsed):
            raise AmdError(f"{where} option {name} must be {self._expected()}, got {value!r}")
        return parsed

    def _within(self, value: OptionValue) -> bool:
        if self.kind not in ("int", "number") or isinstance(value, (bool, str)):
            return True
        return (self.minimum is None or value >= self.minimum) and (self.maximum is None or value <= self.maximum)

    def _expected(self) -> str:
        if self.kind == "bool":
            return "true or false"
        if self.choices:
            return f"one of {', '.join(self.choices)}"
        if self.kind == "text":
            return "text"
        what, shown = ("a whole number", int) if self.kind == "int" else ("a number", float)
        if self.minimum is not None and self.maximum is not None:
            return f"{what} from {shown(self.minimum)} to {shown(self.maximum)}"
        if self.minimum is not None:
            return f"{what} of at least {shown(self.minimum)}"
        return what if self.maximum is None else f"{what} of at most {shown(self.maximum)}"


def _bool(value: object) -> bool | None:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    return True if text in ("1", "true", "yes") else False if text in ("0", "false", "no") else None


def _int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    text = str(value).strip()
    return int(text) if text.lstrip("+-").isdigit() else None


def finite_float(value: Any) -> float:
    """float(value), refusing NaN and the infinities with a ValueError: every bound check passes NaN."""
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{value!r} is not a finite number")
    return number


def _number(value: object) -> float | None:
    try:
        return finite_float(value)
    except (TypeError, ValueError):
        return None


_PARSERS: dict[str, Callable[[object], OptionValue | None]] = {"bool": _bool, "int": _int, "number": _number,
                                                              "text": str}


def parse_options(method: str, kind: str, given: Mapping[str, object],
                  declared: Mapping[str, Option]) -> dict[str, OptionValue]:
    """The `given` options of a method's `kind` ("build" or "run") parsed by their declaration: AmdError naming any
    the method does not declare, or a value its option refuses."""
    unknown = sorted(set(given) - set(declared))
    if unknown:
        raise AmdError(f"memory method {method} has no {kind} option {unknown}; options: "
                       f"{', '.join(declared) or 'none'}")
    where = "memory" if kind == "run" else kind
    return {name: declared[name].parse(value, name, where) for name, value in given.items()}


@dataclass(frozen=True)
class Setting:
    """A build option that the workflow varies like a teacher or an embedder: the config names values of it under
    `section` (e.g. representations: {NAME: VALUE}), a cell takes one by name (`defaults.KEY`, an experiment's
    `section` list), and the paths of the method's banks and runs carry that name. A method without settings has
    none of this in its paths."""

    option: str  # the build option it sets
    section: str  # the config section of named values
    key: str  # a cell's key, a path's wildcard and a column of the runs frame
    schema: dict[str, Any]  # the JSON schema of one named value
    text: Callable[[Any], str | None]  # a named value as the build option's text (None: leave the option out)


@dataclass(frozen=True)
class Config:
    """A named memory config: the method's types it uses and the run options it stands for (a variant of its
    method, e.g. gated function memory); options given for a run override them. `after`: another config whose run
    of the same cell the workflow finishes first (e.g. to find its model replies in the response cache)."""

    types: tuple[str, ...]
    options: Mapping[str, OptionValue] = field(default_factory=dict)
    after: str | None = None


@dataclass(frozen=True, eq=False)  # one spec is one object: compared and hashed by identity
class MethodSpec:
    """What a memory method declares about itself: the entry of `amd.core.registry.MEMORY_METHODS` (or of the entry point
    group `amd.memory_methods`), read without importing the method."""

    name: str
    implementation: str  # "module:Class" of the method (amd.memory.method.MemoryMethod), imported when used
    types: tuple[MemoryType, ...]
    # config name -> Config, or a tuple of type codes (a config without options); `named_configs()` reads them
    configs: Mapping[str, "Config | tuple[str, ...]"]
    build_options: Mapping[str, Option] = field(default_factory=dict)
    run_options: Mapping[str, Option] = field(default_factory=dict)
    settings: tuple[Setting, ...] = ()  # build options the workflow varies (their names are in the paths)
    title: str = ""  # how tables and figures name the method (default: its name)
    # Table 1: its configs shown there (None: every config; (): the method stays out of Table 1); `proposed`: the
    # paper's method, shown last in Table 1, whose first Table 1 config is the one Table 3 and Figures 3-4 show.
    table1: tuple[str, ...] | None = None
    proposed: bool = False
    tables: Mapping[str, str] = field(default_factory=dict)  # its own tables: name -> "module:function" (runs -> table)
    detail_columns: str | None = None  # "module:function": a run's records -> the columns its tables read
    # What its runs add to the trajectory record, as JSON schema properties: {"memory": {...}, "injection": {...}}
    record_fields: Mapping[str, Mapping[str, dict[str, Any]]] = field(default_factory=dict)
    # Fields of the record's `memory` its hooks' `describe` leaves out where they hold these values (amd.core.trajectory:
    # `recorded`), so the runs made before a field existed are the same run as those after it
    record_defaults: Mapping[str, Any] = field(default_factory=dict)
    # "module:function"s for what a run holds beside its records (e.g. an online run's history): run_usage(records,
    # run path) -> the model usage its records do not show, [{"role", "spec", "prompt", "completion"}], or an item
    # {"role", "spec", "known": False, "note"} where it cannot say (amd.analysis.cost); run_entries(run path) -> {id: entry}
    # of the entries the run added to its bank (amd view)
    run_usage: str | None = None
    run_entries: str | None = None
    released_for: tuple[str, ...] = ()  # a baseline: the benchmarks the AMD authors' release has its code for
    reconstructed: str | None = None  # a baseline: what is ours (the note of table1_main)

    def __post_init__(self) -> None:
        configs = self.named_configs()
        object.__setattr__(self, "configs", configs)
        codes = {t.code for t in self.types}
        for name, config in configs.items():
            unknown = [code for code in config.types if code not in codes]
            stray = [key for key in config.options if key not in self.run_options]
            if unknown or stray or (config.after is not None and config.after not in configs):
                raise ValueError(f"memory method {self.name}, config {name}: unknown types {unknown}, run options "
                                 f"{stray} or config after {config.after!r}")
        options = [setting.option for setting in self.settings if setting.option not in self.build_options]
        if options:
            raise ValueError(f"memory method {self.name}: settings of unknown build options {options}")
        if not self.title:
            object.__setattr__(self, "title", self.name)

    def named_configs(self) -> dict[str, Config]:
        """Its configs by name, each a Config."""
        return {name: declared if isinstance(declared, Config) else Config(tuple(declared))
                for name, declared in self.configs.items()}

    def table1_configs(self) -> tuple[str, ...]:
        """The configs Table 1 shows."""
        return tuple(self.configs) if self.table1 is None else self.table1
