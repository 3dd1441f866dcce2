"""Time of the embedded default per stage, and the prompt tokens of each student task, cold (prefilled) and warm
(taken from the server's prefix cache). Reads what a finished workflow left in results/: Snakemake's benchmark
file of every job (results/benchmarks/) and the student trajectories; `--run` first runs the workflow (as
`make run` does) and times it. Prints the load average beside every timing: other work on the machine inflates
wall times.

    .venv/bin/python bench/bench_embedded_default.py [--run] [--results results] [--configfile FILE]
"""

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from amd.analysis.layout import describe_run

REPO = Path(__file__).resolve().parents[1]


def load() -> str:
    return "load average " + " / ".join(f"{value:.2f}" for value in os.getloadavg())


def run_workflow(configfile: str | None) -> None:
    command = [str(Path(sys.executable).parent / "snakemake"), "--cores", "all", "all"]
    if configfile:
        command += ["--configfile", configfile]
    print(f"workflow: {' '.join(command[1:])}; before: {load()}")
    started = time.monotonic()
    subprocess.run(command, cwd=REPO, check=True, capture_output=True)
    print(f"workflow: {time.monotonic() - started:.0f} s wall; after: {load()}")


def job_times(results: Path) -> list[dict]:
    """One row per job: its stage (the results path without the benchmarks/ prefix), wall and CPU seconds, RSS."""
    rows = []
    for path in sorted((results / "benchmarks").rglob("*.tsv")):
        with open(path, newline="") as handle:
            measured = next(csv.DictReader(handle, delimiter="\t"))
        rows.append({"job": str(path.relative_to(results / "benchmarks").with_suffix("")),
                     "wall_s": _number(measured["s"]), "cpu_s": _number(measured.get("cpu_time")),
                     "max_rss_mb": _number(measured.get("max_rss"))})
    return rows


def _number(text) -> float:
    """A benchmark file's value; Snakemake writes NA where a job was too short to sample."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return 0.0


def print_jobs(rows: list[dict]) -> None:
    print(f"\n{'job':90s} {'wall s':>8s} {'cpu s':>8s} {'RSS MB':>8s}")
    for row in rows:
        print(f"{row['job'][:90]:90s} {row['wall_s']:8.1f} {row['cpu_s']:8.1f} {row['max_rss_mb']:8.0f}")
    print(f"{'sum of job wall times (jobs may overlap)':90s} {sum(r['wall_s'] for r in rows):8.1f}")


def task_tokens(results: Path) -> list[dict]:
    """Per student task: prompt tokens prefilled (cold) and taken from the prefix cache (warm), all steps and the
    first step, plus steps, completion tokens and wall time."""
    rows = []
    for path in sorted(results.rglob("trajectories.jsonl")):
        cell = describe_run(path)
        if cell["role"] == "teacher":
            continue
        for line in path.read_text().splitlines():
            record = json.loads(line)
            steps = [step for turn in record["turns"] for step in turn["steps"]]
            first = steps[0]["tokens"] if steps else {}
            warm = record["tokens"].get("cached_prompt", 0)
            rows.append({"run": f"{cell.get('student')}/{cell.get('memcfg')}", "task": record["task_id"],
                         "steps": record["n_steps"], "cold": record["tokens"]["prompt"] - warm, "warm": warm,
                         "first_cold": first.get("prompt", 0) - first.get("cached_prompt", 0),
                         "first_warm": first.get("cached_prompt", 0),
                         "completion": record["tokens"]["completion"], "wall_s": record["wall_time_s"],
                         "success": record["success"]})
    return rows


def print_tokens(rows: list[dict]) -> None:
    print(f"\n{'run':22s} {'task':24s} {'steps':>5s} {'cold':>6s} {'warm':>6s} {'1st cold':>8s} {'1st warm':>8s} "
          f"{'compl':>6s} {'wall s':>7s} ok")
    for row in rows:
        print(f"{row['run'][:22]:22s} {row['task'][:24]:24s} {row['steps']:5d} {row['cold']:6d} {row['warm']:6d} "
              f"{row['first_cold']:8d} {row['first_warm']:8d} {row['completion']:6d} {row['wall_s']:7.1f} "
              f"{int(row['success'])}")
    for run in dict.fromkeys(row["run"] for row in rows):
        mine = [row for row in rows if row["run"] == run]
        print(f"{run}: {len(mine)} tasks, cold {sum(r['cold'] for r in mine)}, warm {sum(r['warm'] for r in mine)}, "
              f"completion {sum(r['completion'] for r in mine)}, {sum(r['wall_s'] for r in mine):.0f} s in tasks")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", action="store_true", help="run the workflow first (snakemake --cores all all)")
    parser.add_argument("--results", default=str(REPO / "results"))
    parser.add_argument("--configfile", help="passed to snakemake with --run")
    args = parser.parse_args()
    if args.run:
        run_workflow(args.configfile)
    results = Path(args.results)
    print(f"reading {results}; now: {load()}")
    print_jobs(job_times(results))
    print_tokens(task_tokens(results))


if __name__ == "__main__":
    main()
