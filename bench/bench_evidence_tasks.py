"""The figures the CPU-scale evidence experiment (config/cpu_evidence.yaml) was designed from, before any student ran:
per AgentDojo user task of the chosen suites its ground truth (calls, and the replies a one-call-per-reply student
needs: the calls and the answer), whether its check passes for an agent that does nothing, and the longest reply of
its ground truth in the student's json prompting, in Qwen2.5 tokens; per suite the tool docs' tokens. Then the
selection rule and the caps those figures give, beside what the config says.

    .venv/bin/python bench/bench_evidence_tasks.py [--configfile config/cpu_evidence.yaml] [--per-task]

Tokens are counted by the embedded 1.5B model's own llama.cpp server (/tokenize), so the script needs its weights
(`make model-1.5b`) and starts that server for a few seconds.
"""

import argparse
import json
import math
import urllib.request
from pathlib import Path

from amd.benchmarks.base import create_benchmark
from amd.llm.local import LocalServer, gguf_path
from amd.llm.specs import LOCAL_WEIGHTS
from amd.workflow.config import active_config, read_config
from amd.workflow.grid import Grid

REPO = Path(__file__).resolve().parents[1]
BENCHMARK = "agentdojo"
MODEL = "qwen2.5-coder-1.5b"
PAPER_STEPS_PER_TURN = 20  # the paper's step cap per turn (config/base.yaml `run`)
TOKEN_MARGIN = 2  # the reply cap holds twice the longest ground-truth reply ...
TOKEN_ROUND = 64  # ... rounded up to a multiple of this


class Tokens:
    """Qwen2.5 token counts from the embedded model's server."""

    def __init__(self):
        self.server = LocalServer(gguf_path(LOCAL_WEIGHTS[MODEL]), MODEL)
        self.url = self.server.base_url.removesuffix("/v1") + "/tokenize"

    def count(self, text: str) -> int:
        request = urllib.request.Request(self.url, data=json.dumps({"content": text}).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as reply:
            return len(json.load(reply)["tokens"])


def task_rows(suites: str, tokens: Tokens) -> tuple[list[dict], dict]:
    """One row per user task of the suites, and the tool docs' tokens per suite."""
    benchmark = create_benchmark(BENCHMARK, suite=suites)
    rows, docs = [], {}
    for task_id in benchmark.task_ids():
        episode = benchmark.start(task_id)
        suite = task_id.split("/")[0]
        if suite not in docs:
            docs[suite] = tokens.count(json.dumps(episode.tools))
        calls = [call for turn in episode.reference_turns() for call in turn]
        replies = [json.dumps({"name": call.name, "arguments": call.arguments}) for call in calls]
        replies += [json.dumps({"answer": answer}) for answer in episode.reference_replies()]
        rows.append({"task": task_id, "group": benchmark.task_group(task_id), "calls": len(calls),
                     "replies": len(calls) + 1, "untouched": episode.score().details["passes_untouched"],
                     "longest_reply_tokens": max(tokens.count(reply) for reply in replies)})
    return rows, docs


def rule(rows: list[dict]) -> dict:
    """The design rule: leave out the tasks whose check passes untouched; a step cap every selected task's ground
    truth fits (the paper's per-turn cap, if it does); a reply cap of twice the longest ground-truth reply."""
    selected = [row for row in rows if not row["untouched"]]
    longest = max(row["replies"] for row in selected)
    steps = max(PAPER_STEPS_PER_TURN, longest)
    reply = max(row["longest_reply_tokens"] for row in selected)
    return {"tasks": [row["task"] for row in selected], "longest_replies": longest, "max_steps_per_turn": steps,
            "longest_reply_tokens": reply,
            "max_tokens": TOKEN_ROUND * math.ceil(TOKEN_MARGIN * reply / TOKEN_ROUND)}


def print_tasks(rows: list[dict]) -> None:
    print("| task | group | ground-truth calls | replies needed | passes untouched | longest reply (tokens) |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['task']} | {row['group']} | {row['calls']} | {row['replies']} | "
              f"{'yes' if row['untouched'] else 'no'} | {row['longest_reply_tokens']} |")


def print_summary(rows: list[dict], docs: dict, chosen: dict) -> None:
    selected = [row for row in rows if not row["untouched"]]
    print("\n| suite | user tasks | pass untouched | selected | replies needed (min-median-max) | tool docs (tokens) |")
    print("|---|---|---|---|---|---|")
    for suite, doc_tokens in docs.items():
        mine = [row for row in rows if row["task"].startswith(f"{suite}/")]
        needed = sorted(row["replies"] for row in mine if not row["untouched"])
        print(f"| {suite} | {len(mine)} | {sum(row['untouched'] for row in mine)} | {len(needed)} | "
              f"{needed[0]}-{needed[len(needed) // 2]}-{needed[-1]} | {doc_tokens:,} |")
    spare = [PAPER_STEPS_PER_TURN / row["replies"] for row in selected]
    print(f"\nselected: {len(selected)} tasks in {len({row['group'] for row in selected})} task groups; longest "
          f"ground truth {chosen['longest_replies']} replies ("
          f"{', '.join(row['task'] for row in selected if row['replies'] == chosen['longest_replies'])}); the cap of "
          f"{chosen['max_steps_per_turn']} replies is at least twice the ground truth for "
          f"{sum(ratio >= 2 for ratio in spare)} of {len(selected)} tasks")
    print(f"longest ground-truth reply {chosen['longest_reply_tokens']} tokens -> reply cap "
          f"{TOKEN_MARGIN} x {chosen['longest_reply_tokens']} rounded up to a multiple of {TOKEN_ROUND}: "
          f"{chosen['max_tokens']}")


def print_config_check(configfile: Path, chosen: dict) -> None:
    """The config's student tasks and caps beside the rule's."""
    grid = Grid(active_config(read_config(configfile), REPO / "config"))
    for name in grid.config["students"]:
        tasks = grid.tasks(BENCHMARK, "student", name)
        settings = grid.run_settings(name, BENCHMARK)
        agrees = (tasks == chosen["tasks"] and settings["max_steps_per_turn"] == chosen["max_steps_per_turn"]
                  and settings["max_tokens"] == chosen["max_tokens"])
        print(f"{configfile.name}: student {name}: {len(tasks)} tasks, max_steps_per_turn "
              f"{settings['max_steps_per_turn']}, max_steps {settings['max_steps']}, max_tokens "
              f"{settings['max_tokens']}: {'agrees with' if agrees else 'DIFFERS from'} the rule")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configfile", type=Path, default=REPO / "config" / "cpu_evidence.yaml")
    parser.add_argument("--per-task", action="store_true", help="print the row of every task")
    args = parser.parse_args()
    config = read_config(args.configfile)
    suites = config["benchmarks"][BENCHMARK]["options"]["suite"]
    tokens = Tokens()
    try:
        rows, docs = task_rows(suites, tokens)
    finally:
        tokens.server.stop()
    chosen = rule(rows)
    if args.per_task:
        print_tasks(rows)
    print_summary(rows, docs, chosen)
    print_config_check(args.configfile, chosen)


if __name__ == "__main__":
    main()
