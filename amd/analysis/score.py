"""`amd score`: a readable table of success rate (with its 95 % Wilson interval: amd.analysis.stats) and the strict
verdict beside it (amd.benchmarks.base.strict_success), steps, tokens,
requests, replies cut by the token limit and cost (tokens and US dollars, writer and user simulator included:
amd.analysis.cost) per run file; under it, for a memory run, what its retrieval saw per memory type (amd.analysis.retrieval:
the queries δ left with no entry, the injected similarities); optional official re-check."""

import json
import sys

from amd.analysis.cost import run_cost
from amd.analysis.retrieval import report_lines, run_retrieval, summary
from amd.analysis.stats import wilson
from amd.benchmarks.base import STRICT_RULE, Benchmark, counted_success, strict_success
from amd.core.errors import AmdError
from amd.core.schema import expected_tasks, read_run
from amd.core.text import printable
from amd.core.trajectory import TrajectoryRecord

COLUMNS = ["file", "agent", "memory", "tasks", "missing", "success_%", "success_ci_low", "success_ci_high",
           "strict_%", "mean_steps", "prompt_tokens", "completion_tokens", "model_requests", "cut_replies", "memory_tokens",
           "user_tokens", "writer_tokens", "total_tokens", "usd"]
COST_ROLES = ("memory", "user", "writer")  # the agent's own tokens are prompt_tokens + completion_tokens
CUT = "length"  # the finish_reason of a reply the server cut at the token limit


def run_metrics(records: list[TrajectoryRecord], expected: list[str] | None = None) -> dict:
    """Success rate, steps, tokens, requests and cut replies of a run's records. Tasks the run was asked for but
    that have no record (crashed, never run) count as failures, and are listed under `missing`."""
    present = {record["task_id"] for record in records}
    missing = [task for task in expected or [] if task not in present]
    n = len(records) + len(missing)
    if n == 0:
        raise AmdError("no trajectories to score")
    return {
        "tasks": n,
        "successes": sum(r["success"] for r in records),
        "success_rate": 100.0 * sum(r["success"] for r in records) / n,
        # the stricter verdict beside it: solved and ended by the agent before any cap (amd.benchmarks.base)
        "strict_successes": sum(map(strict_success, records)),
        "strict_rate": 100.0 * sum(map(strict_success, records)) / n,
        "mean_steps": sum(r["n_steps"] for r in records) / max(len(records), 1),
        "prompt_tokens": sum(r["tokens"]["prompt"] for r in records),
        "completion_tokens": sum(r["tokens"]["completion"] for r in records),
        "model_requests": sum(r.get("model_requests", 0) for r in records),
        "cut_replies": sum(step.get("finish_reason") == CUT for r in records for turn in r["turns"]
                           for step in turn["steps"]),
        "missing": missing,
        "success_by_task": {r["task_id"]: r["success"] for r in records} | dict.fromkeys(missing, False),
        "strict_by_task": {r["task_id"]: strict_success(r) for r in records} | dict.fromkeys(missing, False),
        "steps_by_task": {r["task_id"]: r["n_steps"] for r in records},
    }


def summarize(path) -> dict:
    records = read_run(path)
    try:
        metrics = run_metrics(records, expected_tasks(path))
    except AmdError as error:
        raise AmdError(f"{path}: {error}") from None
    if metrics["missing"]:
        print(printable(f"amd score: {path}: {len(metrics['missing'])} of {metrics['tasks']} tasks the run was asked "
                        f"for have no record and count as failures: {', '.join(metrics['missing'])}"), file=sys.stderr)
    return {
        "file": str(path),
        "agent": records[0]["agent"]["spec"] if records else "-",
        "memory": records[0]["memory"].get("config") if records else "-",
        "tasks": metrics["tasks"],
        "missing": len(metrics["missing"]),
        "success_%": round(metrics["success_rate"], 2),
        **{f"success_{end}": round(value, 2) for end, value in zip(("ci_low", "ci_high"),
                                                                     wilson(metrics["successes"], metrics["tasks"]))},
        "strict_%": round(metrics["strict_rate"], 2),
        "mean_steps": round(metrics["mean_steps"], 2),
        **{key: metrics[key] for key in ("prompt_tokens", "completion_tokens", "model_requests", "cut_replies")},
        **cost_columns(run_cost(records, path)),
        # per memory type: queries δ left with no entry, injected similarities ({} without memory)
        "retrieval": {type_name: summary(item) for type_name, item in run_retrieval(records).items()},
    }


def cost_columns(cost: dict) -> dict:
    """Tokens per role beside the agent's, the total and US dollars (None: unknown); the parts and notes too."""
    by_role = {role: [part["tokens"] for part in cost["parts"] if part["role"] == role] for role in COST_ROLES}
    return {**{f"{role}_tokens": None if None in tokens else sum(tokens) for role, tokens in by_role.items()},
            "total_tokens": cost["tokens"], "usd": None if cost["usd"] is None else round(cost["usd"], 4),
            "cost": cost["parts"], "cost_notes": cost["notes"]}


def recheck(path) -> list[str]:
    """Re-score every stored trajectory with its benchmark's own checker; return the task ids whose verdict differs.
    A task that did not finish counts as when it ran (amd.benchmarks.base.counted_success)."""
    from amd.benchmarks.base import create_benchmark

    benchmarks: dict[str, Benchmark] = {}
    mismatched: list[str] = []
    try:
        for record in read_run(path):
            name = record["benchmark"]
            benchmark = benchmarks.get(name) or benchmarks.setdefault(name, create_benchmark(name))
            verdict = counted_success(benchmark.rescore(record), record["status"],
                                      benchmark.record_step_limit_scored(record))
            if verdict != record["success"]:
                mismatched.append(record["task_id"])
    finally:
        for benchmark in benchmarks.values():
            benchmark.close()
    return mismatched


def format_table(rows: list[dict]) -> str:
    cells = [COLUMNS] + [["—" if row[column] is None else printable(row[column], lines=False) for column in COLUMNS]
                         for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(COLUMNS))]
    lines = ["  ".join(value.ljust(width) for value, width in zip(line, widths)) for line in cells]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def score_from_args(args) -> int:
    rows = [summarize(path) for path in args.files]
    print(format_table(rows))
    for row in rows:
        for note in row["cost_notes"]:
            print(printable(f"{row['file']}: cost: {note}"))
    for row in rows:
        if row["retrieval"]:
            print(printable(f"{row['file']}: retrieval, per memory type (δ: the minimum similarity):"))
            print(printable("\n".join(report_lines(row["retrieval"]))))
    print(f"success_%: the benchmark's own verdict; {STRICT_RULE}")
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
            print(printable(f"{path}: the benchmark's checker disagrees on {len(mismatched)} tasks: "
                            f"{', '.join(mismatched)}"), file=sys.stderr)
        else:
            print(printable(f"{path}: the benchmark's checker agrees with every stored verdict"))
    return status
