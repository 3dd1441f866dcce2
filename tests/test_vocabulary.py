"""One vocabulary: the config schema, the command line and the workflow take memory types, memory configs,
protocols, benchmarks and outputs from amd.vocabulary and amd.registry, and no other module spells them out or
names a benchmark."""

import ast
import re
from pathlib import Path

import pytest

from amd.cli import build_parser, parse_per_type
from amd.errors import AmdError
from amd.registry import BENCHMARKS, MEMORY_METHODS, OUTPUTS, Registry
from amd.vocabulary import PROTOCOLS, ZERO_SHOT, memory_configs, memory_types
from amd.workflow.config import config_schema
from amd.workflow.grid import Grid

REPO = Path(__file__).resolve().parents[1]
AMD = REPO / "amd"
BENCHMARK_PACKAGES = {"bfcl_eval", "appworld", "agentdojo", "tool_sandbox"}


def test_the_config_schema_enums_are_the_vocabulary():
    defs = config_schema()["$defs"]
    assert defs["memory_type"]["enum"] == list(memory_types())
    assert defs["memory_config"]["enum"] == list(memory_configs())
    assert defs["memory_method"]["enum"] == MEMORY_METHODS.names()
    assert defs["protocol"]["enum"] == list(PROTOCOLS)
    assert defs["benchmark"]["enum"] == BENCHMARKS.names()
    assert defs["output"]["enum"] == OUTPUTS.names()


def test_the_command_line_accepts_every_config_and_type_code():
    run_help = build_parser()._subparsers._group_actions[0].choices["run"].format_help()
    flat = " ".join(run_help.split())
    assert all(name in flat for name in memory_configs())
    for code, memory_type in memory_types().items():
        assert parse_per_type(f"{code}=2", "--k", int) == {memory_type.name: 2}
        assert parse_per_type(f"{memory_type.name}=0.5", "--delta", float) == {memory_type.name: 0.5}
    with pytest.raises(AmdError, match="unknown memory type 'wx'"):
        parse_per_type("wx=1", "--k", int)


def test_the_workflow_wildcards_are_the_vocabulary():
    assert Grid.memory_config_names().split("|") == [name for name in memory_configs() if name != ZERO_SHOT]
    assert Grid.method_names().split("|") == MEMORY_METHODS.names()
    outputs = Grid.output_names("table").split("|") + Grid.output_names("figure").split("|")
    assert sorted(outputs) == sorted(OUTPUTS.names())  # tables and figures may be registered in any order


def literal_lists(tree: ast.AST):
    """Every list, tuple or set literal made only of string constants."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)) and node.elts and all(
                isinstance(element, ast.Constant) and isinstance(element.value, str) for element in node.elts):
            yield {element.value for element in node.elts}


def python_files(outside=()):
    return [path for path in AMD.rglob("*.py")
            if not any(path.is_relative_to(AMD / part) for part in outside)]


def test_no_module_but_the_vocabulary_lists_memory_configs_or_types():
    words = set(memory_configs()) | set(memory_types()) | {t.name for t in memory_types().values()}
    for path in python_files(outside=("vocabulary.py",)):
        for items in literal_lists(ast.parse(path.read_text())):
            assert len(items & words) < 2, f"{path.relative_to(REPO)} spells out {sorted(items & words)}"
    for path in [*(REPO / "rules").glob("*.smk"), REPO / "Snakefile"]:
        quoted = set(re.findall(r"[\"']([a-z_]+)[\"']", path.read_text()))
        assert len(quoted & words) < 2, f"{path.relative_to(REPO)} spells out {sorted(quoted & words)}"


def docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            found.add(id(body[0].value))
    return found


def test_no_module_outside_the_benchmarks_names_a_benchmark():
    """Code, string literals and imports; docstrings and comments may cite where a number was measured."""
    names = set(BENCHMARKS.names()) | BENCHMARK_PACKAGES
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, sorted(names))) + r")\b", re.IGNORECASE)
    for path in python_files(outside=("benchmarks", "registry.py")):
        tree = ast.parse(path.read_text())
        skip = docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
                text = node.value
            elif isinstance(node, ast.Name):
                text = node.id
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                text = " ".join([getattr(node, "module", None) or ""] + [alias.name for alias in node.names])
            else:
                continue
            assert not pattern.search(text.replace("_", " ")), f"{path.relative_to(REPO)}:{node.lineno}: {text!r}"


def test_the_agent_loop_never_imports_a_memory_method():
    for path in (AMD / "agent").glob("*.py"):
        imports = [node for node in ast.walk(ast.parse(path.read_text()))
                   if isinstance(node, (ast.Import, ast.ImportFrom))]
        modules = [getattr(node, "module", None) or node.names[0].name for node in imports]
        assert not any(module.startswith("amd.memory") for module in modules), path.name


def test_a_registry_refuses_a_second_entry_and_suggests_a_near_name():
    registry = Registry("thing")
    registry.add("alpha", "json:dumps")
    with pytest.raises(AmdError, match="registered twice"):
        registry.add("alpha", "json:loads")
    with pytest.raises(AmdError, match=r"unknown thing 'alpah' \(did you mean 'alpha'\?\)"):
        registry.load("alpah")
    registry.add("later", unavailable="needs a licence")
    with pytest.raises(AmdError, match="declared but cannot run here: needs a licence"):
        registry.load("later")
    assert registry.load("alpha")({"a": 1}) == '{"a": 1}'
