"""The layers a reader sees in amd/'s folders hold over the whole import graph: every import a module runs (at its top
or inside a function, and every module named to importlib; imports for type checking only aside) goes to its own
layer or one below, no import goes round in a cycle, and nothing in amd imports amd.api, the public surface over all
of them. One table says the layers, bottom first."""

import ast
from pathlib import Path

AMD = Path(__file__).resolve().parents[1] / "amd"
LAYERS = ("core", "llm", "benchmarks", "agent", "memory", "analysis", "workflow", "cli", "api")
# Modules whose layer is not their folder's: the package itself; amd.api over every layer; a method's own tables,
# outputs that the analysis loads (the method's spec names them).
PLACED = {"amd": "core", "amd.api": "api", "amd.memory.amd_method.tables": "analysis"}


def module_name(path: Path) -> str:
    parts = path.relative_to(AMD.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(AMD.rglob("*.py"))}


def layer(module: str) -> str:
    return PLACED.get(module) or module.split(".")[1]


def imported(source: str) -> set[str]:
    """The amd modules a module's `source` imports when it runs."""
    tree = ast.parse(source)
    typing_only = {id(node) for block in ast.walk(tree) if isinstance(block, ast.If)
                   and ast.unparse(block.test) == "TYPE_CHECKING" for statement in block.body
                   for node in ast.walk(statement)}
    names = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
        elif (isinstance(node, ast.Call) and ast.unparse(node.func).endswith("import_module") and node.args
              and isinstance(node.args[0], ast.Constant)):
            names.add(node.args[0].value)
    return {name for name in names if name in MODULES}


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
    assert not cycles(graph)


def test_the_graph_sees_lazy_imports_and_cycles_and_skips_type_checking_imports():
    source = ("from typing import TYPE_CHECKING\nimport importlib\nif TYPE_CHECKING:\n    import amd.api\n"
              "def f():\n    from amd.core import errors\n    importlib.import_module('amd.cli')\n")
    assert imported(source) == {"amd.core", "amd.core.errors", "amd.cli"}
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c", "a"]]
