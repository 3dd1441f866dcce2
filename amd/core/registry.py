"""Every plug-in point of amd: a name maps to a lazy `module:attr` string, so listing names imports nothing and an
unused plug-in costs nothing. A misspelt name gets "did you mean".

To add a benchmark, a memory method, an agent, an embedder or an output (table or figure), write its module (or
folder) and add one line to amd/plugins.toml, or let an installed package declare it under the registry's entry
point group (below, e.g. `amd.memory_methods`), so that a plug-in can live outside this tree: the same line either
way, and this module names no plug-in's module itself. A memory method's entry is its spec
(`amd.core.spec.MethodSpec`, a small module beside the method): its types, configs, options and tables, read without
importing the method.
"""

import importlib
import importlib.metadata
import threading
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar, cast

from amd.core.errors import AmdError, did_you_mean
from amd.core.spec import MethodSpec

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


IN_TREE = Path(__file__).resolve().parents[1] / "plugins.toml"  # this tree's plug-ins, one line each

BENCHMARKS: Registry[Callable[..., Any]] = Registry("benchmark", groups={"amd.benchmarks": {}})
AGENTS: Registry[type[Any]] = Registry("agent", check=lambda found: isinstance(found, type), expected="a class")
MEMORY_METHODS: Registry[MethodSpec] = Registry("memory method", groups={"amd.memory_methods": {}},
                                                check=lambda found: isinstance(found, MethodSpec),
                                                expected="its spec (amd.api.MethodSpec)")
WRITERS: Registry[Callable[..., Any]] = Registry("memory writer")
EMBEDDERS: Registry[Callable[..., Any]] = Registry("embedder")
# Tables and figures; installed packages add theirs under `amd.tables` and `amd.figures`.
OUTPUTS: Registry[Callable[..., Any]] = Registry("output", groups={"amd.tables": {"kind": "table"},
                                                                   "amd.figures": {"kind": "figure"}})
# Each section of plugins.toml: its registry, and the meta its entries get.
SECTIONS: dict[str, tuple[Registry[Any], dict[str, Any]]] = {
    "benchmarks": (BENCHMARKS, {}), "agents": (AGENTS, {}), "memory_methods": (MEMORY_METHODS, {}),
    "writers": (WRITERS, {}), "embedders": (EMBEDDERS, {}), "tables": (OUTPUTS, {"kind": "table"}),
    "figures": (OUTPUTS, {"kind": "figure"})}


def register_in_tree(path: Path = IN_TREE) -> None:
    """Add the plug-ins a plugins.toml lists: `name = "module:attr"`, or an inline table with its `target` and meta."""
    with open(path, "rb") as f:
        sections = tomllib.load(f)
    for section, entries in sections.items():
        registry, meta = SECTIONS[section]
        for name, value in entries.items():
            fields = dict(value) if isinstance(value, dict) else {"target": value}
            registry.add(name, fields.pop("target"), **meta, **fields)


register_in_tree()


def _method_tables() -> Iterable[tuple[str, str, dict[str, Any]]]:
    for entry in MEMORY_METHODS.entries():
        spec = MEMORY_METHODS.load(entry.name)
        for name, target in spec.tables.items():
            yield name, target, {"kind": "table", "method": spec.name}


OUTPUTS.add_source(_method_tables)

