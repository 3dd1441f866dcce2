"""How many task groups each benchmark's duplicates join (amd.benchmarks.duplicates; docs/guides/exclusion-groups.md):
per benchmark that can be opened here, its tasks, task groups, exclusion groups and the merged groups, and how long
finding them took. A benchmark that cannot be opened (AppWorld without its data, ToolSandbox without its
environment) is named with the reason.

    .venv/bin/python bench/bench_groups.py [--benchmark NAME ...]
"""

import argparse
import contextlib
import time

from amd.analysis.groups import summary, summary_lines
from amd.benchmarks.base import create_benchmark
from amd.benchmarks.duplicates import exclusion_groups
from amd.core.errors import AmdError

OPTIONS = {"toolsandbox": {"user_model": "vllm:unused@http://127.0.0.1:9"}}  # listing needs a user model's name only


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--benchmark", nargs="+", default=["agentdojo", "bfcl", "toolsandbox", "appworld"])
    for name in parser.parse_args().benchmark:
        started = time.perf_counter()
        try:
            with contextlib.closing(create_benchmark(name, **OPTIONS.get(name, {}))) as benchmark:
                found = exclusion_groups(benchmark)
        except AmdError as error:
            print(f"{name}: not measured ({error})")
            continue
        print("\n".join(summary_lines(summary(name, found))))
        print(f"  found in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
