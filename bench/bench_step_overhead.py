"""Per-chat overhead of the model layer (SDK, HTTP, cache), with an instant scripted server: no model time.

    .venv/bin/python bench/bench_step_overhead.py [--n 300]
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from scripted_server import ScriptedServer

from amd.llm import open_model

# A BFCL-sized conversation: a ~20 KB system prompt (tool docs) and a few turns.
SYSTEM = {"role": "system", "content": "tool docs " * 2000}


def messages(i: int) -> list[dict]:
    return [SYSTEM, {"role": "user", "content": f"turn {i}: list the files"},
            {"role": "assistant", "content": '{"name": "ls", "arguments": {}}'},
            {"role": "user", "content": f"Results of your calls: ['a.txt', 'b{i}.txt']"}]


def median_ms(model, n: int, offset: int) -> float:
    times = []
    for i in range(n):
        start = time.perf_counter()
        reply = model.chat(messages(offset + i))
        times.append(time.perf_counter() - start)
        assert reply.error is None
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300)
    n = parser.parse_args().n
    os.environ["AMD_CACHE_DIR"] = tempfile.mkdtemp(prefix="amd-bench-")
    with ScriptedServer() as server:
        spec = f"vllm:bench-model@{server.url}"
        with open_model(spec, {"cache": False}) as model:
            median_ms(model, 20, 0)  # warm the connection
            off = median_ms(model, n, 0)
        with open_model(spec) as model:
            miss = median_ms(model, n, 10_000)
            hit = median_ms(model, n, 10_000)
    print(f"per-chat overhead, median of {n}, instant server, ~20 KB prompt:")
    print(f"  cache off          {off:7.2f} ms  (request)")
    print(f"  cache on, miss     {miss:7.2f} ms  (lookup + request + atomic write)")
    print(f"  cache on, hit      {hit:7.2f} ms  (lookup only, no request)")


if __name__ == "__main__":
    main()
