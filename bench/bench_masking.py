"""How many injected memory entries carry their source trajectory's raw values, before and after value masking.

    .venv/bin/python bench/bench_masking.py [--embedder local:all-minilm-l6-v2] [--suite banking,slack]

Runs the oracle on AgentDojo's suites (the embedded default's teacher), builds its bank three times with the rules
writer (`entry_values` raw, masked, scrubbed; amd.memory.placeholders.ValueMask), then injects memory for the
default's 13 student tasks without a student: `wf_st_fn` at task start (the instruction as the only subtask query,
where a student would decompose it) and a function hint for every function the task's oracle run calls (as if each
failed once), under `shared` and `self_excluded`. For every injected subtask and function entry, as the run would
show it (code form), it counts the entries holding a value of their source's calls (strings of 3+ characters,
numbers of 2+ digits: the placeholder audit's values), in their calls and user turns, and anywhere (results
included), and the entries holding a typed placeholder. A simulation of the injections, not a student's run.
"""

import argparse
import json
import re
import sys
import tempfile
from collections import Counter
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from amd.agent.hooks import TaskContext
from amd.cli import main as amd_main
from amd.memory.build import build_bank
from amd.memory.method import open_memory
from amd.memory.placeholders import trajectory_values
from amd.memory.steps import steps_of
from amd.methods.amd.render import render_block

ROOT = Path(__file__).resolve().parent.parent
MODES = ("raw", "masked", "scrubbed")
PLACEHOLDER = re.compile(r"<[A-Z_]+>")


def without_results(text: str) -> str:
    """What an entry shows but its results: each `# -> result` line and the result after a `# before:` call."""
    kept = [line.split(" -> ")[0] if line.startswith("# before:") else line
            for line in text.splitlines() if not line.startswith("# -> ")]
    return "\n".join(kept)


def count_injections(bank: Path, records: dict, tasks: list[str], protocol: str) -> Counter:
    hooks = open_memory(bank, "wf_st_fn", protocol=protocol)
    groups = json.loads((bank / "manifest.json").read_text())["task_groups"]
    counts: Counter = Counter()
    for task_id in tasks:
        record = records[task_id]
        task = TaskContext(task_id, groups[task_id], record["instruction"])
        functions = list(dict.fromkeys(call["name"] for step in steps_of(record) for call in step.calls))
        injected = hooks.task_start(task).records + hooks.after_error(task, functions).records
        for item in injected:
            if item["type"] == "workflow":
                continue
            entry = next(e for e in hooks.bank.entries[item["type"]] if e["id"] == item["entry_id"])
            shown = render_block(item["type"], [entry], "code")
            source = records[entry["source_task_id"]]
            values = [value for value, _ in trajectory_values([c for s in steps_of(source) for c in s.calls])]
            counts["entries"] += 1
            counts["own task"] += entry["source_task_id"] == task_id
            counts["raw in calls"] += any(value in without_results(shown) for value in values)
            counts["raw anywhere"] += any(value in shown for value in values)
            counts["placeholders"] += bool(PLACEHOLDER.search(shown))
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", default="local:all-minilm-l6-v2")
    parser.add_argument("--suite", default="banking,slack")
    args = parser.parse_args()
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    tasks = config["benchmarks"]["agentdojo"]["student_tasks"]
    with tempfile.TemporaryDirectory() as where:
        run = Path(where) / "oracle.jsonl"
        assert amd_main(["run", "agentdojo", "--agent", "oracle", "--benchmark-option", f"suite={args.suite}",
                         "--out", str(run), "--no-progress"]) == 0
        records = {r["task_id"]: r for r in map(json.loads, run.read_text().splitlines())}
        print(f"oracle: {sum(r['success'] for r in records.values())} of {len(records)} tasks solved; "
              f"embedder {args.embedder}; {len(tasks)} student tasks; subtask and function entries injected\n")
        print("| protocol | entry_values | injected | from the task itself | raw values in calls or user turns | "
              "raw values anywhere | with placeholders |")
        print("|---|---|---|---|---|---|---|")
        for mode in MODES:
            bank = Path(where) / mode
            build_bank([run], "amd", "rules", args.embedder, bank, options={"entry_values": mode})
            for protocol in ("shared", "self_excluded"):
                c = count_injections(bank, records, tasks, protocol)
                print(f"| {protocol} | {mode} | {c['entries']} | {c['own task']} | {c['raw in calls']} | "
                      f"{c['raw anywhere']} | {c['placeholders']} |")


if __name__ == "__main__":
    main()
