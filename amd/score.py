"""`amd score`: a readable table of success rate, steps and tokens per run file; optional official re-check."""

import json
import sys

from amd.benchmarks.base import counted_success
from amd.errors import AmdError
from amd.schema import read_trajectories

COLUMNS = ["file", "agent", "memory", "tasks", "success_%", "mean_steps", "prompt_tokens", "completion_tokens",
           "model_requests"]


def summarize(path) -> dict:
    records = read_trajectories(path)
    if not records:
        raise AmdError(f"{path}: no trajectories to score")
    n = len(records)
    return {
        "file": str(path),
        "agent": records[0]["agent"]["spec"],
        "memory": records[0]["memory"].get("config"),
        "tasks": n,
        "success_%": round(100.0 * sum(r["success"] for r in records) / n, 2),
        "mean_steps": round(sum(r["n_steps"] for r in records) / n, 2),
        "prompt_tokens": sum(r["tokens"]["prompt"] for r in records),
        "completion_tokens": sum(r["tokens"]["completion"] for r in records),
        "model_requests": sum(r.get("model_requests", 0) for r in records),
    }


def recheck(path) -> list[str]:
    """Re-score every stored trajectory with its benchmark's own checker; return the task ids whose verdict differs.
    A task that did not finish counts as when it ran (amd.benchmarks.base.counted_success)."""
    from amd.registry import create_benchmark

    benchmarks, mismatched = {}, []
    for record in read_trajectories(path):
        name = record["benchmark"]
        benchmark = benchmarks.get(name) or benchmarks.setdefault(name, create_benchmark(name))
        verdict = counted_success(benchmark.rescore(record), record["status"], benchmark.step_limit_scored)
        if verdict != record["success"]:
            mismatched.append(record["task_id"])
    return mismatched


def format_table(rows: list[dict]) -> str:
    cells = [COLUMNS] + [[str(row[column]) for column in COLUMNS] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(COLUMNS))]
    lines = ["  ".join(value.ljust(width) for value, width in zip(line, widths)) for line in cells]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def score_from_args(args) -> int:
    rows = [summarize(path) for path in args.files]
    print(format_table(rows))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(rows, handle, indent=1)
    if not args.recheck:
        return 0
    status = 0
    for path in args.files:
        mismatched = recheck(path)
        if mismatched:
            status = 1
            print(f"{path}: the benchmark's checker disagrees on {len(mismatched)} tasks: {', '.join(mismatched)}",
                  file=sys.stderr)
        else:
            print(f"{path}: the benchmark's checker agrees with every stored verdict")
    return status
