"""The served grid at the paper's shape on one node, through the real workflow: 8 served students x 8 cells (zero-shot,
8 seeds; one batch, one server each) on 8 listed GPUs, with a stand-in `vllm` (tests/stand_in_vllm.py) and the
pipeline tests' stand-in `amd` (tests/slurm/fake_amd.py: each run asks its server, then sleeps --run-seconds).
Prints, per --cores: the workflow's exit code and wall time, the server starts, the batches running at once, and per
server its cells in flight over time (sampled every second from the cells' start and end times).

    .venv/bin/python bench/bench_served_grid.py [--cores 16 2] [--run-seconds 20]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW_FILES = ("Snakefile", "rules", "config", "report", "profiles", "environment.yml")
STUDENTS, CELLS = 8, 8


def workdir(where: Path) -> dict:
    for name in WORKFLOW_FILES:
        source = ROOT / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, where / name)
    bin_dir = where / "bin"
    bin_dir.mkdir()
    for name, script in (("amd", "tests/slurm/fake_amd.py"), ("vllm", "tests/stand_in_vllm.py")):
        (bin_dir / name).write_text(f'#!/bin/sh\nexec "{sys.executable}" "{ROOT / script}" "$@"\n')
        (bin_dir / name).chmod(0o755)
    return os.environ | {"PATH": f"{bin_dir}:{Path(sys.executable).parent}:{os.environ['PATH']}",
                         "PYTHONPATH": str(ROOT), "FAKE_AMD_LOG": str(where / "calls.jsonl"),
                         "FAKE_AMD_TIMES": str(where / "times.jsonl"), "STAND_IN_VLLM_LOG": str(where / "vllm.jsonl"),
                         "AMD_VLLM_BIN": str(bin_dir / "vllm"), "AMD_GPU_LOCK_DIR": str(where / "locks"),
                         "CUDA_VISIBLE_DEVICES": ",".join(map(str, range(STUDENTS))), "AMD_CACHE_DIR": str(where / "cache")}


def config() -> dict:
    students = {f"s{i}": {"spec": f"vllm:org/s{i}", "serve": {"gpus": 1}} for i in range(STUDENTS)}
    return {"students": students,
            "experiments": {"served": {"benchmarks": ["bfcl"], "students": list(students), "memory_configs": ["zero_shot"],
                                       "seeds": list(range(CELLS)), "outputs": ["table2_ablation"]}}}


def targets() -> list[str]:
    return [f"results/bfcl/student-s{i}/zero_shot/seed{seed}/trajectories.jsonl"
            for i in range(STUDENTS) for seed in range(CELLS)]


def measure(cores: int, run_seconds: float) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-served-grid-") as folder:
        where = Path(folder)
        env = workdir(where) | {"FAKE_AMD_RUN_SECONDS": str(run_seconds)}
        (where / "grid.yaml").write_text(yaml.safe_dump(config()))
        start = time.time()
        done = subprocess.run([str(Path(sys.executable).parent / "snakemake"), *targets(), "--cores", str(cores),
                               "--resources", f"gpu={STUDENTS}", "--configfile", "grid.yaml"], cwd=where, env=env,
                              capture_output=True, text=True, check=False)
        wall = time.time() - start
        servers = [json.loads(line) for line in (where / "vllm.jsonl").read_text().splitlines()]
        runs = [json.loads(line) for line in (where / "times.jsonl").read_text().splitlines()]
    starts = [entry for entry in servers if entry["event"] == "start"]
    by_server: dict[str, list[dict]] = {}
    for run in runs:
        by_server.setdefault(run["agent"].split("@", 1)[1], []).append(run)
    spans = {url: (min(r["start"] for r in cells), max(r["end"] for r in cells)) for url, cells in by_server.items()}
    at_once = max(sum(begin <= moment < end for begin, end in spans.values()) for moment, _ in spans.values())
    print(f"--cores {cores}: rc {done.returncode}, wall {wall:.1f} s, {len(starts)} server starts on devices "
          f"{sorted(entry['devices'] for entry in starts)}, {len(runs)} cells, batches at once: {at_once}")
    for url, cells in sorted(by_server.items(), key=lambda item: spans[item[0]][0]):
        first = spans[url][0]
        seconds = range(int(spans[url][1] - first) + 1)
        flight = [sum(r["start"] <= first + t < r["end"] for r in cells) for t in seconds]
        print(f"  server from +{first - start:5.1f} s: cells in flight per second {flight}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cores", type=int, nargs="+", default=[16, 2])
    parser.add_argument("--run-seconds", type=float, default=20.0)
    args = parser.parse_args()
    for cores in args.cores:
        measure(cores, args.run_seconds)


if __name__ == "__main__":
    main()
