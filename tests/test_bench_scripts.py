"""The bench scripts stay runnable as the package changes: every name they import from amd exists."""

import ast
import importlib
import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


def amd_imports(script: Path) -> list[tuple[str, str]]:
    tree = ast.parse(script.read_text())
    return [(node.module, alias.name) for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "amd"
            for alias in node.names]


@pytest.mark.parametrize("script", sorted(BENCH.glob("bench_*.py")), ids=lambda path: path.name)
def test_every_name_a_bench_script_imports_from_amd_exists(script):
    for module_name, name in amd_imports(script):
        module = importlib.import_module(module_name)
        assert hasattr(module, name) or importlib.util.find_spec(f"{module_name}.{name}"), \
            f"{script.name}: `from {module_name} import {name}` fails"
