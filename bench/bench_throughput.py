"""Concurrency efficiency of the real `amd run` path: the runner, the agent loop, real BFCL episodes and a ChatModel
(response cache on, as `amd run` has it) against a replay server of latency L in its own process.

With C tasks in flight and every step waiting L on the server, the ideal is C / L steps per second; efficiency is
the achieved rate divided by that. Two figures per C: over the steady part of the run (from the start until the
last task was started, while C tasks were always in flight) and over the whole run (which ends with fewer than C
tasks left). The client's CPU per step, all its threads together, bounds the rate by 1 / CPU on one core: the GIL
lets one thread run Python at a time. By Little's law a step is in flight C / rate on average: L at the server, the
rest in the client, using or waiting for its one core.

With --processes P the tasks are dealt round-robin to P processes, each a real `amd run` path with C / P tasks in
flight and its own GIL and SDK client, all started together against the same server; the steady window then ends
when the first process starts its last task. The machine's busy share of its cores over the run (from /proc/stat,
server and clients together) says whether the cores, not the GIL, are the bound.

    .venv/bin/python bench/bench_throughput.py [--latency 0.05] [--concurrency 16 64] [--tasks 200] [--processes 1]
"""

import argparse
import multiprocessing
import os
import tempfile
import time
from pathlib import Path

from bench_pipeline_step import server_process

from amd.agent.agents import ModelAgent
from amd.agent.runner import RunSpec, run_tasks
from amd.benchmarks.base import create_benchmark
from amd.core.schema import read_trajectories
from amd.llm import open_model


def run(url: str, task_ids: list[str], concurrency: int, work: Path, start_at: float = 0.0) -> dict:
    """One `amd run` over the tasks, begun at wall-clock `start_at`; its steps, the steps asked of the server by
    each task start (seconds from the start), its end and its CPU."""
    os.environ["AMD_CACHE_DIR"] = str(work / "cache")  # a fresh response cache: every step asks the server
    benchmark, started = create_benchmark("bfcl"), []
    with open_model(f"vllm:bench@{url}") as model:
        def make_agent(episode):
            started.append((time.perf_counter(), model.ledger.requests))
            return ModelAgent(model)

        spec = RunSpec(benchmark=benchmark, make_agent=make_agent,
                       agent_info={"spec": model.spec, "kind": "model", "model": model.model, "params": {}})
        time.sleep(max(0.0, start_at - time.time()))
        cpu, wall = time.process_time(), time.perf_counter()
        summary = run_tasks(spec, task_ids, work / "run.jsonl", concurrency=concurrency, progress=False)
        cpu, ended = time.process_time() - cpu, time.perf_counter()
        assert summary.finished == len(task_ids) and model.ledger.failures == 0
    steps = sum(record["n_steps"] for record in read_trajectories(work / "run.jsonl"))
    return {"steps": steps, "starts": [(at - wall, requests) for at, requests in started], "seconds": ended - wall,
            "cpu_s": cpu}


def _shard(url: str, task_ids: list[str], concurrency: int, start_at: float) -> dict:
    return run(url, task_ids, concurrency, Path(tempfile.mkdtemp(prefix="amd-bench-")), start_at)


def run_processes(url: str, task_ids: list[str], concurrency: int, processes: int) -> dict:
    """The tasks dealt to `processes` runs started together; their combined rates, CPU per step and machine load."""
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        start_at = time.time() + 5  # after every process has imported amd
        pending = pool.starmap_async(_shard, [(url, task_ids[index::processes], concurrency // processes, start_at)
                                              for index in range(processes)])
        time.sleep(max(0.0, start_at - time.time()))
        busy = _busy_jiffies()
        shards = pending.get()
        busy = [now - then for now, then in zip(_busy_jiffies(), busy)]
        pool.close()
        pool.join()  # let the processes exit on their own: terminating them leaks their semaphores
    steps, seconds = sum(shard["steps"] for shard in shards), max(shard["seconds"] for shard in shards)
    steady_end = min(shard["starts"][-1][0] for shard in shards)
    steps_by_then = sum(max(requests for at, requests in shard["starts"] if at <= steady_end) for shard in shards)
    return {"steps": steps, "rate": steps / seconds, "steady_rate": steps_by_then / steady_end,
            "cpu_ms": 1000 * sum(shard["cpu_s"] for shard in shards) / steps, "machine_busy": busy[0] / busy[1]}


def _busy_jiffies() -> tuple[int, int]:
    """(busy, total) CPU time of the whole machine so far, from the first line of /proc/stat."""
    fields = [int(value) for value in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle and iowait
    return sum(fields) - idle, sum(fields)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.05, help="server latency L in seconds")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--processes", type=int, default=1, help="client processes sharing the tasks")
    args = parser.parse_args()
    if any(concurrency % args.processes for concurrency in args.concurrency):
        parser.error(f"each --concurrency must be a multiple of --processes {args.processes}")
    task_ids = [f"multi_turn_base_{i}" for i in range(args.tasks)]
    print(f"real `amd run` path, {len(task_ids)} BFCL tasks, server latency L = {args.latency * 1000:.0f} ms "
          f"in its own process, response cache on, {args.processes} client process(es), {os.cpu_count()} cores:")
    cores = min(args.processes, os.cpu_count())  # one GIL per process
    with server_process(task_ids, args.latency) as url:
        for concurrency in args.concurrency:
            ideal = concurrency / args.latency
            result = run_processes(url, task_ids, concurrency, args.processes)
            in_flight_ms = 1000 * concurrency / result["steady_rate"]
            print(f"  C = {concurrency:3d}: ideal {ideal:6.0f} steps/s; steady {result['steady_rate']:6.0f} steps/s "
                  f"= {result['steady_rate'] / ideal:4.0%}; whole run {result['rate']:6.0f} steps/s "
                  f"= {result['rate'] / ideal:4.0%} ({result['steps']} steps)\n"
                  f"          client CPU {result['cpu_ms']:.2f} ms/step (ceiling on {cores} core(s) "
                  f"{cores * 1000 / result['cpu_ms']:.0f} steps/s); a step in flight {in_flight_ms:.0f} ms, of which "
                  f"{in_flight_ms - 1000 * args.latency:.0f} ms in the client; machine busy "
                  f"{result['machine_busy']:.0%} of its cores")


if __name__ == "__main__":
    main()
