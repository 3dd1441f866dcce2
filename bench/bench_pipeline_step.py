"""Per-step pipeline overhead, excluding the model: real BFCL episodes, real agent loop, the openai SDK on its own
HTTP transport, against an instant scripted server that replays ground truth, in its own process as a real model
server would be, with the response cache off so every step makes a request. Two figures per step: the CPU time of the agent's thread
(prompt building, the SDK request, parsing, safe execution, record keeping: the pipeline's work), and the wall time
per step, which also holds the server's own handling (JSON in and out), so it is an upper bound. Per-task work
(fresh backends, the official checker) is timed apart and printed per task.

    .venv/bin/python bench/bench_pipeline_step.py [--tasks 40] [--rounds 5]
"""

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1] / "tests"

from amd.agent.agents import ModelAgent
from amd.agent.hooks import TaskContext
from amd.agent.loop import Limits, run_episode
from amd.benchmarks.base import create_benchmark
from amd.llm import open_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=5, help="timed passes over the tasks, after one warm-up pass")
    args = parser.parse_args()
    task_ids = [f"multi_turn_base_{i}" for i in range(args.tasks)]
    os.environ["AMD_CACHE_DIR"] = tempfile.mkdtemp(prefix="amd-bench-")
    benchmark = create_benchmark("bfcl")
    with server_process(task_ids) as url, open_model(f"vllm:bench@{url}", {"cache": False}) as model:
        run_round(benchmark, model, task_ids)  # warm-up: connection, imports, lazy tables
        rounds = [run_round(benchmark, model, task_ids) for _ in range(args.rounds)]
    steps = sum(rounds[0]["steps"])
    print(f"per-step pipeline overhead over {len(task_ids)} BFCL tasks ({steps} steps), model time excluded; "
          f"median over tasks, per round ({args.rounds} rounds):")
    for label, key in (("agent-thread CPU", "cpu_ms"), ("wall, server included", "wall_ms")):
        medians = sorted(statistics.median(r[key]) for r in rounds)
        print(f"  {label:22s} median {statistics.median(medians):5.2f} ms   rounds {medians[0]:.2f}..{medians[-1]:.2f} ms"
              f"   p90 {statistics.quantiles([v for r in rounds for v in r[key]], n=10)[-1]:5.2f} ms"
              "   (goal: median <= 2 ms)")
    print(f"per task: fresh backends {statistics.median(v for r in rounds for v in r['start_ms']):.2f} ms, "
          f"official checker {statistics.median(v for r in rounds for v in r['score_ms']):.2f} ms (medians, CPU)")


def run_round(benchmark, model, task_ids) -> dict:
    """One pass over the tasks: per task, CPU and wall ms per step without the checker, and the per-task costs."""
    timings = {"cpu_ms": [], "wall_ms": [], "start_ms": [], "score_ms": [], "steps": []}
    for task_id in task_ids:
        cpu_started = time.thread_time()
        episode = benchmark.start(task_id)
        timings["start_ms"].append(1000 * (time.thread_time() - cpu_started))
        scoring = timed(episode)
        started, cpu_started = time.perf_counter(), time.thread_time()
        record = run_episode(ModelAgent(model), episode, Limits(), TaskContext(task_id, task_id, episode.instruction))
        steps = record["n_steps"]
        timings["cpu_ms"].append(1000 * (time.thread_time() - cpu_started - scoring["cpu_s"]) / steps)
        timings["wall_ms"].append(1000 * (time.perf_counter() - started - scoring["wall_s"]) / steps)
        timings["score_ms"].append(1000 * scoring["cpu_s"])
        timings["steps"].append(steps)
    return timings


@contextlib.contextmanager
def server_process(task_ids, latency_s: float = 0.0):
    """The replay server in a child process, answering after `latency_s`; yields its base URL."""
    code = (f"import sys, time; sys.path.insert(0, {str(TESTS)!r})\n"
            "from replay_model import ground_truth_answers, replay_model\n"
            "from scripted_server import ScriptedServer\n"
            f"server = ScriptedServer(replay_model(ground_truth_answers({task_ids!r})), latency_s={latency_s!r})\n"
            "server.__enter__()\n"
            "print(server.url, flush=True)\n"
            "time.sleep(3600)\n")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        yield child.stdout.readline().strip()
    finally:
        child.kill()
        child.wait()


def timed(episode) -> dict:
    """Wrap episode.score so the official checker's time can be taken out of the per-step figure."""
    totals, score = {"cpu_s": 0.0, "wall_s": 0.0}, episode.score

    def timed_score():
        cpu, wall = time.thread_time(), time.perf_counter()
        try:
            return score()
        finally:
            totals["cpu_s"] += time.thread_time() - cpu
            totals["wall_s"] += time.perf_counter() - wall

    episode.score = timed_score
    return totals


if __name__ == "__main__":
    main()
