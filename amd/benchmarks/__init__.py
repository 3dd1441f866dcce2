"""Benchmark registry: names map to lazy imports, so unused benchmarks cost nothing to import."""

import importlib

from amd.errors import AmdError, did_you_mean

_IMPLEMENTED = {"bfcl": "amd.benchmarks.bfcl:BfclMultiTurn"}
_DECLARED = {
    "appworld": "AppWorld needs its task data under $APPWORLD_ROOT/data (appworld download data) and an "
    "adapter that is not written yet",
    "toolsandbox": "ToolSandbox needs a checkout of apple/ToolSandbox and an adapter that is not written yet",
    "agentdojo": "AgentDojo needs an adapter that is not written yet",
}


def benchmark_names() -> list[str]:
    return sorted(_IMPLEMENTED) + sorted(_DECLARED)


def get_benchmark(name: str, **options):
    if name in _DECLARED:
        raise AmdError(f"benchmark {name!r} is declared but cannot run here: {_DECLARED[name]}")
    if name not in _IMPLEMENTED:
        raise AmdError(f"unknown benchmark {name!r}{did_you_mean(name, benchmark_names())}; "
                       f"known: {', '.join(benchmark_names())}")
    module, attr = _IMPLEMENTED[name].split(":")
    return getattr(importlib.import_module(module), attr)(**options)
