"""The similarity distribution a per-embedder δ is chosen from (workflow and subtask retrieval on BFCL).

    .venv/bin/python bench/bench_delta.py [--embedder local:all-minilm-l6-v2] [--bank DIR]

Builds (or reuses) the bank of the oracle teacher's 200 BFCL trajectories with the `rules` writer and the given
embedder, then, as a student run under `self_excluded` would, compares every task's instruction with the workflow
entries and each of its own rule-segment labels (stand-ins for the student's decomposition labels) with the subtask
entries, over every entry of another group. A pair is related when both tasks call a common
function, unrelated when they share no app (BFCL class). Prints the quantiles of the similarity of related and
unrelated pairs and the threshold that best separates them (Youden's J = share of related pairs kept − share of
unrelated pairs kept), and the lowest threshold that lets at most 1 % of unrelated pairs through: the value written
into the config for that embedder. δ 0.30 / 0.45 are the AMD authors' values for text-embedding-3-small.
"""

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
# δ keeps unrelated memory out of a small student's prompt, so it is chosen for precision: at most this share of
# unrelated pairs passes it. (Youden's J, the balanced choice, is printed beside it.)
MAX_UNRELATED_KEPT = 0.01


def build(bank: Path, embedder: str) -> None:
    teacher = bank.parent / "oracle.jsonl"
    amd = [sys.executable, "-m", "amd.cli"]
    subprocess.run([*amd, "run", "bfcl", "--agent", "oracle", "--concurrency", "4", "--no-progress",
                    "--out", str(teacher)], check=True)
    subprocess.run([*amd, "memory", "build", "--trajectories", str(teacher), "--embedder", embedder,
                    "--out", str(bank)], check=True)


def pair_similarities(bank, embedder, type_name, queries, functions):
    """Similarities of every query to every entry of another group, split into related pairs (the query's task
    and the entry's task call a common function) and unrelated ones (no common app); pairs that share an app but
    no function are left out as ambiguous."""
    entries, vectors = bank.entries[type_name], bank.vectors(type_name)
    related, unrelated = [], []
    for task_id, texts in queries.items():
        scores = embedder.embed(texts) @ vectors.T
        group = bank.manifest["task_groups"][task_id]
        for column, entry in enumerate(entries):
            source = entry["source_task_id"]
            if entry["source_group"] == group:
                continue
            if functions[task_id] & functions[source]:
                related += scores[:, column].tolist()
            elif not apps_of(functions[task_id]) & apps_of(functions[source]):
                unrelated += scores[:, column].tolist()
    return np.array(related), np.array(unrelated)


def apps_of(functions: set) -> set:
    return {name.partition(".")[0] for name in functions}


def report(name: str, related: np.ndarray, unrelated: np.ndarray) -> None:
    quantiles = (0.1, 0.25, 0.5, 0.75, 0.9)
    print(f"\n{name}: {len(related)} related pairs (a common function), {len(unrelated)} unrelated (no common app)")
    for label, values in (("related", related), ("unrelated", unrelated)):
        shown = "  ".join(f"q{int(q * 100)} {np.quantile(values, q):.3f}" for q in quantiles)
        print(f"  {label:10s} {shown}")
    grid = np.round(np.arange(0.0, 1.0, 0.01), 2)
    j = [(related >= t).mean() - (unrelated >= t).mean() for t in grid]
    best = grid[int(np.argmax(j))]
    print(f"  best separating threshold {best:.2f} (Youden's J {max(j):.3f}: keeps {(related >= best).mean():.0%} "
          f"of related pairs, {(unrelated >= best).mean():.1%} of unrelated ones)")
    strict = next(t for t in grid if (unrelated >= t).mean() <= MAX_UNRELATED_KEPT)
    print(f"  chosen: lowest threshold keeping at most {MAX_UNRELATED_KEPT:.0%} of unrelated pairs: {strict:.2f} "
          f"(keeps {(related >= strict).mean():.0%} of related)")
    for delta in (0.30, 0.45):
        print(f"  at δ {delta:.2f}: keeps {(related >= delta).mean():.0%} of related, "
              f"{(unrelated >= delta).mean():.1%} of unrelated")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", default="local:all-minilm-l6-v2")
    parser.add_argument("--bank", help="where the bank of the oracle's BFCL trajectories is (built there if absent)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("AMD_CACHE_DIR", str(Path(tmp) / "cache"))
        from amd.memory.bank import load_bank
        from amd.memory.embed import get_embedder
        from amd.registry import create_benchmark

        bank_dir = Path(args.bank or Path(tmp) / "bank")
        if not bank_dir.exists():
            bank_dir.parent.mkdir(parents=True, exist_ok=True)
            build(bank_dir, args.embedder)
        bank = load_bank(bank_dir)
        embedder = get_embedder(bank.manifest["embedder"])
        benchmark = create_benchmark("bfcl")
        functions = {task: set() for task in bank.manifest["task_ids"]}
        for entry in bank.entries["function"]:
            functions[entry["source_task_id"]].add(f"{benchmark.function_info(entry['name']).app}.{entry['name']}")
        instructions = {e["source_task_id"]: [e["query"]] for e in bank.entries["workflow"]}
        labels = {}
        for entry in bank.entries["subtask"]:
            labels.setdefault(entry["source_task_id"], []).append(entry["label"])
        print(f"embedder {embedder.spec}; bank of {len(instructions)} tasks")
        report("workflow (query: the task instruction)",
               *pair_similarities(bank, embedder, "workflow", instructions, functions))
        report("subtask (queries: the task's segment labels)",
               *pair_similarities(bank, embedder, "subtask", labels, functions))

if __name__ == "__main__":
    main()
