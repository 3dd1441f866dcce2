"""Where the CPU-scale evidence run's time went (config/cpu_evidence.yaml): per student run, its tasks, those solved,
those that ended at the step cap, its steps, and the steps a task took after it first repeated a call it had already
made with the same arguments (what a rule that stopped a task at its first repeat would have saved, and the tasks
such a rule would have cost). Reads the run files under a results folder; Snakemake's job times are printed by
bench/bench_embedded_default.py --results.

    .venv/bin/python bench/bench_evidence_run.py [--results results]
"""

import argparse
import json
from pathlib import Path

from amd.analysis.layout import describe_run


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
    print("| run | tasks | solved | at the step cap | steps | tasks that repeat a call | steps after the first "
          "repeat | solved though they repeat | seconds in tasks |")
    print("|---|---|---|---|---|---|---|---|---|")
    for path in sorted(Path(args.results).rglob("trajectories.jsonl")):
        cell = describe_run(path)
        if cell["role"] not in ("zero_shot", "memory"):
            continue
        rows = [task_figures(json.loads(line)) for line in path.read_text().splitlines() if line.strip()]
        steps = sum(row["steps"] for row in rows)
        after = sum(row["after_repeat"] for row in rows)
        print(f"| {cell['student']}/{cell['memcfg']} | {len(rows)} | {sum(row['success'] for row in rows)} | "
              f"{sum(row['capped'] for row in rows)} | {steps} | {sum(row['repeats'] for row in rows)} | "
              f"{after} ({100 * after / max(steps, 1):.0f} %) | "
              f"{sum(row['repeats'] and row['success'] for row in rows)} | {sum(row['wall_s'] for row in rows):.0f} |")


if __name__ == "__main__":
    main()
