"""Median top-1 retrieval latency over a 10,000-entry subtask index (goal: ≤ 1 ms).

    .venv/bin/python bench/bench_retrieval.py [--entries 10000] [--embedder hash:384] [--queries 1000]

Builds a synthetic bank (rules writer) in a temporary folder, then times the hooks' subtask retrieval: the query
embedding (a fresh text each time, so no cache hit) plus the FAISS search with self-exclusion. `search only`
times the FAISS part alone. The default embedder is the hashed test embedder at MiniLM's 384 dimensions, so the
figure is retrieval, not model inference; pass --embedder local:all-minilm-l6-v2 to include the real model.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

VERBS = ["send", "move", "copy", "list", "buy", "sell", "book", "cancel", "post", "check"]
OBJECTS = ["message", "file", "report", "stock", "flight", "ticket", "tweet", "order", "folder", "balance"]


def synthetic_record(i: int) -> dict:
    """One successful two-turn trajectory: two subtask entries, one workflow entry, two function entries."""
    def turn(j):
        verb, obj = VERBS[(i + j) % 10], OBJECTS[(i * 7 + j) % 10]
        call = {"name": "add", "arguments": {"a": i, "b": j}, "call": f"add(a={i}, b={j})"}
        text = f"Please {verb} the {obj} number {i}-{j} for client {i % 97} in region {j + i % 13}."
        return {"user": text, "steps": [{"model_text": call["call"], "calls": [call],
                                         "observations": [json.dumps({"result": i + j})], "error": False}]}
    turns = [turn(0), turn(1)]
    return {"schema": "amd.trajectory/1", "task_id": f"synthetic_{i}", "benchmark": "bfcl",
            "data_version": {"package": "synthetic", "sha256": "0"}, "agent": {"spec": "oracle", "kind": "oracle"},
            "memory": {"config": "zero_shot", "bank": None}, "instruction": turns[0]["user"], "turns": turns,
            "decoded_calls": [[[s["calls"][0]["call"]] for s in t["steps"]] for t in turns], "success": True,
            "checker": {}, "status": "finished", "error": None, "n_steps": 2,
            "tokens": {"prompt": 0, "completion": 0}, "wall_time_s": 0.0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=10_000, help="subtask entries in the index")
    parser.add_argument("--embedder", default="hash:384")
    parser.add_argument("--queries", type=int, default=1000)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("AMD_CACHE_DIR", str(Path(tmp) / "cache"))
        from amd.agent.hooks import TaskContext
        from amd.memory.build import build_bank
        from amd.memory.method import open_memory

        trajectories = Path(tmp) / "t.jsonl"
        with open(trajectories, "w") as handle:
            handle.writelines(json.dumps(synthetic_record(i)) + "\n" for i in range(args.entries // 2))
        start = time.perf_counter()
        build_bank([trajectories], "amd", "rules", args.embedder, Path(tmp) / "bank")
        print(f"built a bank of {args.entries} subtask entries in {time.perf_counter() - start:.1f} s",
              file=sys.stderr)
        hooks = open_memory(Path(tmp) / "bank", "st_only", delta=-1.0)
        queries = [f"{VERBS[q % 10]} {OBJECTS[q // 10 % 10]} request {q}" for q in range(args.queries)]
        hooks.search("subtask", "warm up", TaskContext("synthetic_0", "synthetic_0", ""))
        full, search_only = [], []
        for number, query in enumerate(queries):
            task = TaskContext(f"synthetic_{number}", f"synthetic_{number}", query)
            started = time.perf_counter()
            hits = hooks.search("subtask", query, task)
            full.append(time.perf_counter() - started)
            vector = hooks.embedder.embed_one(query)
            started = time.perf_counter()
            hooks.bank.search("subtask", vector, 1, -1.0, hooks.excluded(task))
            search_only.append(time.perf_counter() - started)
            assert hits, "every query must retrieve one entry"
    print(f"top-1 retrieval over {args.entries} entries ({args.embedder}): "
          f"median {statistics.median(full) * 1e3:.3f} ms (embed + search), "
          f"{statistics.median(search_only) * 1e3:.3f} ms (search only); goal <= 1 ms")


if __name__ == "__main__":
    main()
