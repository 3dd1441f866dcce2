"""Concurrency efficiency of the real `amd run` path: the runner, the agent loop, real BFCL episodes and a ChatModel
(response cache on, as `amd run` has it) against a replay server of latency L in its own process.

With C tasks in flight and every step waiting L on the server, the ideal is C / L steps per second; efficiency is
the achieved rate divided by that. Two figures per C: over the steady part of the run (from the start until the
last task was started, while C tasks were always in flight) and over the whole run (which ends with fewer than C
tasks left). The client's CPU per step, all its threads together, bounds the rate by 1 / CPU on one core: the GIL
lets one thread run Python at a time. By Little's law a step is in flight C / rate on average: L at the server, the
rest in the client, using or waiting for its one core.

    .venv/bin/python bench/bench_throughput.py [--latency 0.05] [--concurrency 16 64] [--tasks 200]
"""

import argparse
import os
import tempfile
import time
from pathlib import Path

from bench_pipeline_step import server_process

from amd.agent.agents import ModelAgent
from amd.llm import open_model
from amd.registry import create_benchmark
from amd.runner import RunSpec, run_tasks
from amd.schema import read_trajectories


def run(url: str, task_ids: list[str], concurrency: int, work: Path) -> dict:
    """One `amd run` over the tasks; the rates it reached and the client's CPU per step."""
    os.environ["AMD_CACHE_DIR"] = str(work / "cache")  # a fresh response cache: every step asks the server
    benchmark, started = create_benchmark("bfcl"), []
    with open_model(f"vllm:bench@{url}") as model:
        def make_agent(episode):
            started.append((time.perf_counter(), model.ledger.requests))
            return ModelAgent(model)

        spec = RunSpec(benchmark=benchmark, make_agent=make_agent,
                       agent_info={"spec": model.spec, "kind": "model", "model": model.model, "params": {}})
        cpu, wall = time.process_time(), time.perf_counter()
        summary = run_tasks(spec, task_ids, work / "run.jsonl", concurrency=concurrency, progress=False)
        cpu, ended = time.process_time() - cpu, time.perf_counter()
        assert summary.finished == len(task_ids) and model.ledger.failures == 0
    steps = sum(record["n_steps"] for record in read_trajectories(work / "run.jsonl"))
    last_start, steps_by_then = started[-1]
    return {"steps": steps, "rate": steps / (ended - wall), "steady_rate": steps_by_then / (last_start - wall),
            "cpu_ms": 1000 * cpu / steps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.05, help="server latency L in seconds")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--tasks", type=int, default=200)
    args = parser.parse_args()
    task_ids = [f"multi_turn_base_{i}" for i in range(args.tasks)]
    print(f"real `amd run` path, {len(task_ids)} BFCL tasks, server latency L = {args.latency * 1000:.0f} ms "
          "in its own process, response cache on:")
    with server_process(task_ids, args.latency) as url:
        for concurrency in args.concurrency:
            ideal = concurrency / args.latency
            result = run(url, task_ids, concurrency, Path(tempfile.mkdtemp(prefix="amd-bench-")))
            in_flight_ms = 1000 * concurrency / result["steady_rate"]
            print(f"  C = {concurrency:3d}: ideal {ideal:6.0f} steps/s; steady {result['steady_rate']:6.0f} steps/s "
                  f"= {result['steady_rate'] / ideal:4.0%}; whole run {result['rate']:6.0f} steps/s "
                  f"= {result['rate'] / ideal:4.0%} ({result['steps']} steps)\n"
                  f"          client CPU {result['cpu_ms']:.2f} ms/step (one-core ceiling "
                  f"{1000 / result['cpu_ms']:.0f} steps/s); a step in flight {in_flight_ms:.0f} ms, of which "
                  f"{in_flight_ms - 1000 * args.latency:.0f} ms in the client")


if __name__ == "__main__":
    main()
