"""Dry-run planning time of the paper's full grid (config/paper.yaml): how long Snakemake needs to parse the
workflow, validate the config and build the job graph, before any job runs. Prints each try and the median,
as wall time and as the CPU time of the snakemake process (the part that does not depend on machine load).

    .venv/bin/python bench/bench_plan.py [--repeats 3] [--target all]
"""

import argparse
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def child_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def plan_once(target: str) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, planned jobs); CPU time does not grow when other work shares the machine."""
    started, cpu_started = time.monotonic(), child_cpu_seconds()
    result = subprocess.run(
        [str(Path(sys.executable).parent / "snakemake"), target, "-n", "--cores", "8",
         "--configfile", "config/paper.yaml"],
        cwd=REPO, capture_output=True, text=True, check=True)
    took, cpu = time.monotonic() - started, child_cpu_seconds() - cpu_started
    total = re.search(r"^total\s+(\d+)$", result.stdout, re.MULTILINE)
    return took, cpu, int(total.group(1)) if total else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--target", default="all", help="a target of the paper grid, e.g. results/paper/fig5_k_sweep.pdf")
    args = parser.parse_args()
    walls, cpus = [], []
    for attempt in range(1, args.repeats + 1):
        took, cpu, jobs = plan_once(args.target)
        walls.append(took)
        cpus.append(cpu)
        print(f"try {attempt}: {took:.2f} s wall, {cpu:.2f} s CPU to plan {jobs} jobs ({args.target})")
    print(f"median {statistics.median(walls):.2f} s wall, {statistics.median(cpus):.2f} s CPU over {len(walls)} tries")


if __name__ == "__main__":
    main()
