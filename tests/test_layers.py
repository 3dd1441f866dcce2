"""The layers a reader sees in amd/'s folders hold over the whole import graph: every import a module makes (at its top
or inside a function, for type checking only, and every amd module a string in its code names: a `module:attr`
target for the registry, a module for importlib) goes to its own layer or one below, no import goes round in a
cycle, and nothing in amd imports amd.api, the public surface over all of them. One table says the layers, bottom
first; a module's layer is its folder's (`amd` itself is core's, `amd.api` its own)."""

import ast
import tomllib
from pathlib import Path

AMD = Path(__file__).resolve().parents[1] / "amd"
LAYERS = ("core", "llm", "benchmarks", "agent", "memory", "analysis", "methods", "workflow", "cli", "api")


def module_name(path: Path) -> str:
    parts = path.relative_to(AMD.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(AMD.rglob("*.py"))}


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "core"


def imported(source: str, strings: bool = True) -> set[str]:
    """The amd modules a module's `source` imports, wherever the import statement is (type-checking blocks too), and
    with `strings` every string (or f-string's leading text) that names an amd module, alone or as the module of a
    `module:attr` target (the registry's and importlib's way to import). A dict's keys are names, not imports (the
    registry's entry point groups are named like packages)."""
    tree, names = ast.parse(source), set()
    keys = {id(key) for node in ast.walk(tree) if isinstance(node, ast.Dict) for key in node.keys}
    for node in ast.walk(tree):
        if id(node) in keys:
            continue
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
        elif strings and isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.add(node.value.partition(":")[0])
        elif strings and isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
            names.add(str(node.values[0].value).partition(":")[0])
    return {name for name in names if name in MODULES}


def dynamic_imports(source: str) -> list[str]:
    """The import_module calls whose module is not written where they are."""
    return [ast.unparse(node) for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Call)
            and ast.unparse(node.func).endswith("import_module")
            and not (node.args and isinstance(node.args[0], ast.Constant))]


def plugin_targets() -> dict[str, str]:
    """amd/plugins.toml's entries (section/name -> target), the tree's registrations."""
    sections = tomllib.loads((AMD / "plugins.toml").read_text())
    return {f"{section}/{name}": value["target"] if isinstance(value, dict) else value
            for section, entries in sections.items() for name, value in entries.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    found, done = [], set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            found.append([*path[path.index(module):], module])
        elif module not in done:
            for target in sorted(graph[module]):
                visit(target, [*path, module])
            done.add(module)

    for module in sorted(graph):
        visit(module, [])
    return found


def test_the_layers_hold_over_the_whole_import_graph():
    graph = {module: imported(path.read_text()) - {module} for module, path in MODULES.items()}
    assert sorted(path.stem for path in AMD.glob("*.py")) == ["__init__", "api"], "a module outside the layers"
    assert {layer(module) for module in graph} <= set(LAYERS)
    upward = [f"{module} ({layer(module)}) -> {target} ({layer(target)})" for module, targets in sorted(graph.items())
              for target in sorted(targets) if LAYERS.index(layer(target)) > LAYERS.index(layer(module))]
    assert not upward, "\n".join(upward)
    assert not [module for module, targets in graph.items() if "amd.api" in targets]


def test_no_import_at_run_time_goes_round_in_a_cycle():
    graph = {module: imported(path.read_text(), strings=False) - {module} for module, path in MODULES.items()}
    assert not cycles(graph)


def test_one_loader_imports_what_no_code_names():
    """A module named by a variable is imported only by the registry's loader, which loads the targets that
    plugins.toml, entry points and specs write as strings (each of them checked above, or below)."""
    found = {module: calls for module, path in MODULES.items() if (calls := dynamic_imports(path.read_text()))}
    assert found == {"amd.core.registry": ["importlib.import_module(module)"]}


def test_every_plugin_of_the_tree_is_a_module_of_a_plugin_layer():
    targets = plugin_targets()
    assert len(targets) > 20
    misplaced = {name: target for name, target in targets.items()
                 if target.partition(":")[0] not in MODULES
                 or layer(target.partition(":")[0]) not in ("benchmarks", "agent", "memory", "analysis", "methods")}
    assert not misplaced


def test_the_graph_sees_every_kind_of_import_and_cycles():
    source = ("from typing import TYPE_CHECKING\nimport importlib\nif TYPE_CHECKING:\n    import amd.api\n"
              "def f(name):\n    from amd.core import errors\n    importlib.import_module('amd.cli')\n"
              "    importlib.import_module(name)\n    return 'amd.workflow.grid:Grid', f'amd.analysis.tables:{name}'\n")
    assert imported(source) == {"amd.api", "amd.core", "amd.core.errors", "amd.cli", "amd.workflow.grid",
                                "amd.analysis.tables"}
    assert imported(source, strings=False) == {"amd.api", "amd.core", "amd.core.errors"}
    assert dynamic_imports(source) == ["importlib.import_module(name)"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c", "a"]]
