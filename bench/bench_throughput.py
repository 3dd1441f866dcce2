"""Throughput of one ChatModel shared by threads against a server of latency L and capacity C.

    .venv/bin/python bench/bench_throughput.py [--latency 0.2] [--capacity 8] [--n 160]

Prints achieved requests/s beside the server's ceiling C/L, at several client concurrencies up to C.
"""

import argparse
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from scripted_server import ScriptedServer

from amd.llm import open_model


def run(latency: float, capacity: int, concurrency: int, n: int) -> tuple[float, int]:
    with ScriptedServer(latency_s=latency, capacity=capacity) as server, \
            open_model(f"vllm:bench-model@{server.url}", {"cache": False}) as model:
        start = time.perf_counter()
        with ThreadPoolExecutor(concurrency) as pool:
            replies = list(pool.map(lambda i: model.chat([{"role": "user", "content": f"q{i}"}]), range(n)))
        elapsed = time.perf_counter() - start
        assert all(r.error is None for r in replies)
        return n / elapsed, server.max_in_flight


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--capacity", type=int, default=8)
    parser.add_argument("--n", type=int, default=160)
    args = parser.parse_args()
    os.environ["AMD_CACHE_DIR"] = tempfile.mkdtemp(prefix="amd-bench-")
    ceiling = args.capacity / args.latency
    print(f"server latency L={args.latency} s, capacity C={args.capacity}: ceiling C/L = {ceiling:.1f} req/s")
    for concurrency in sorted({1, max(1, args.capacity // 2), args.capacity}):
        n = args.n if concurrency == args.capacity else max(10, args.n * concurrency // args.capacity)
        rate, peak = run(args.latency, args.capacity, concurrency, n)
        print(f"  {concurrency:3d} threads, {n:4d} requests: {rate:7.1f} req/s "
              f"(ideal {concurrency / args.latency:.1f}, {rate / (concurrency / args.latency):.0%}), "
              f"peak in flight {peak}")


if __name__ == "__main__":
    main()
