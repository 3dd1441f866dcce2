"""The paper grid's model servers under the throughput model of amd.workflow.serving: server starts, student
GPU-hours and the wall time on a node, one server per job (each job starting its own) against one per batch (the
workflow), for several caps on requests in flight per server. Before any pilot the per-task figures are the
config's priors (config/paper.yaml `estimate.benchmarks`); this script also measures BFCL's from its data.

    .venv/bin/python bench/bench_paper_grid_gpu.py [--node-gpus 8] [--caps 16 32 64 128] [--runs pilot.jsonl ...]
"""

import argparse
import json
import statistics
from pathlib import Path

from amd.benchmarks.base import create_benchmark
from amd.workflow.config import active_config, read_config
from amd.workflow.estimate import estimate
from amd.workflow.grid import Grid
from amd.workflow.serving import plans

ROOT = Path(__file__).resolve().parents[1]
TOKENIZER = ROOT / ".venv-vllm" / "models" / "qwen2.5-coder-0.5b" / "tokenizer.json"  # Qwen's, as Qwen3's


def bfcl_prior() -> None:
    """Ground-truth calls and turns per task and the tokens of the function docs, over multi_turn_base."""
    from tokenizers import Tokenizer

    if not TOKENIZER.exists():
        print(f"BFCL prior: {TOKENIZER} is missing (make vllm-cpu); skipped")
        return
    count = Tokenizer.from_file(str(TOKENIZER))
    benchmark = create_benchmark("bfcl")
    rows = []
    for task in benchmark.task_ids():
        episode = benchmark.start(task)
        turns = episode.reference_turns()
        rows.append((sum(len(turn) for turn in turns), len(turns), len(count.encode(json.dumps(episode.tools)).ids)))
    calls, turns, docs = (statistics.mean(row[i] for row in rows) for i in range(3))
    print(f"BFCL prior over {len(rows)} tasks: {calls:.2f} ground-truth calls and {turns:.2f} turns per task "
          f"(replies: {calls + turns:.1f}), {docs:,.0f} tokens of function docs per task")


def paper_config(cap: int) -> dict:
    config = active_config(read_config(ROOT / "config/paper.yaml"), ROOT / "config")
    for entry in [*config["students"].values(), *config["teachers"].values()]:
        if "serve" in entry:
            entry["serve"]["max_in_flight"] = cap
    return config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--node-gpus", type=int, default=8)
    parser.add_argument("--caps", type=int, nargs="+", default=[16, 32, 64, 128])
    parser.add_argument("--runs", nargs="+", default=[], help="pilot run files, as amd plan --runs takes them")
    args = parser.parse_args()
    bfcl_prior()
    for cap in args.caps:
        grid = Grid(paper_config(cap))
        table, _ = estimate(grid, args.runs)
        servers, basis, notes = plans(grid, table, args.node_gpus)
        print(f"\nserve.max_in_flight {cap} ({basis})")
        print(servers.to_markdown(index=False, floatfmt=",.1f"))
        for note in notes:
            print(f"note: {note}")


if __name__ == "__main__":
    main()
