"""Where the CPU-scale evidence run's time went (config/cpu_evidence.yaml): per student run, its tasks, those solved,
those that ended at the step cap, its steps, and the steps a task took after it first repeated a call it had already
made with the same arguments (what a rule that stopped a task at its first repeat would have saved, and the tasks
such a rule would have cost); then each memory run against the zero-shot run of its student over the tasks both
have finished (a run still going, or stopped, counts only its finished tasks): solved with 95 % Wilson intervals and
the exact sign test, by the benchmark's verdict and by the strict one (amd.benchmarks.base.strict_success: solved
and ended by the agent before the step cap). Reads the run files under a results folder; Snakemake's job times are printed by
bench/bench_embedded_default.py --results.

    .venv/bin/python bench/bench_evidence_run.py [--results results]
"""

import argparse
import json
from pathlib import Path

from amd.analysis.layout import describe_run
from amd.analysis.paired import paired_counts
from amd.analysis.stats import wilson
from amd.benchmarks.base import strict_success


def task_figures(record: dict) -> dict:
    """Steps, and steps after the task's first call that repeats an earlier one of the same task (name and
    arguments alike)."""
    seen, first_repeat = set(), None
    steps = [step for turn in record["turns"] for step in turn["steps"]]
    for index, step in enumerate(steps):
        calls = [json.dumps([call["name"], call["arguments"]], sort_keys=True) for call in step["calls"]]
        if first_repeat is None and any(call in seen for call in calls):
            first_repeat = index
        seen.update(calls)
    after = len(steps) - first_repeat - 1 if first_repeat is not None else 0
    return {"steps": len(steps), "repeats": first_repeat is not None, "after_repeat": after,
            "capped": record["status"] == "step_limit", "success": record["success"],
            "wall_s": record["wall_time_s"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", default="results")
    args = parser.parse_args()
    runs, strict_runs = {}, {}
    print("| run | tasks | solved | at the step cap | steps | tasks that repeat a call | steps after the first "
          "repeat | solved though they repeat | seconds in tasks |")
    print("|---|---|---|---|---|---|---|---|---|")
    for path in sorted(Path(args.results).rglob("trajectories.jsonl")):
        cell = describe_run(path)
        if cell["role"] not in ("zero_shot", "memory"):
            continue
        records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        runs[(cell["student"], cell["memcfg"])] = {record["task_id"]: record["success"] for record in records}
        strict_runs[(cell["student"], cell["memcfg"])] = {record["task_id"]: strict_success(record)
                                                         for record in records}
        rows = [task_figures(record) for record in records]
        steps = sum(row["steps"] for row in rows)
        after = sum(row["after_repeat"] for row in rows)
        print(f"| {cell['student']}/{cell['memcfg']} | {len(rows)} | {sum(row['success'] for row in rows)} | "
              f"{sum(row['capped'] for row in rows)} | {steps} | {sum(row['repeats'] for row in rows)} | "
              f"{after} ({100 * after / max(steps, 1):.0f} %) | "
              f"{sum(row['repeats'] and row['success'] for row in rows)} | {sum(row['wall_s'] for row in rows):.0f} |")
    print("\nBy the benchmark's verdict:")
    print_paired(runs)
    print("\nBy the strict verdict (solved, and ended by the agent before the step cap):")
    print_paired(strict_runs)


def print_paired(runs: dict) -> None:
    """Each memory run against its student's zero-shot run, over the tasks both finished."""
    print("| student | memory | tasks both finished | zero-shot solved [95 % CI] | with memory [95 % CI] | "
          "memory only | zero-shot only | sign test p |")
    print("|---|---|---|---|---|---|---|---|")
    for (student, memcfg), verdicts in sorted(runs.items()):
        zero_shot = runs.get((student, "zero_shot"))
        if memcfg == "zero_shot" or zero_shot is None:
            continue
        counts = paired_counts(zero_shot, verdicts, "solved")
        n = counts["tasks"]
        print(f"| {student} | {memcfg} | {n} | {counts['zero_shot']} {percent_interval(counts['zero_shot'], n)} | "
              f"{counts['with_memory']} {percent_interval(counts['with_memory'], n)} | {counts['memory_only']} | "
              f"{counts['zero_shot_only']} | {counts['sign_test_p']} |")


def percent_interval(successes: int, attempts: int) -> str:
    low, high = wilson(successes, attempts)
    return f"[{low:.1f}, {high:.1f}]"


if __name__ == "__main__":
    main()
