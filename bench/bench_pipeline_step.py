"""Per-step pipeline overhead, excluding the model: real BFCL episodes, real agent loop, real SDK client, against
an instant scripted server that replays ground truth, in its own process as a real model server would be, with
the response cache off so every step makes a request. Two figures per step: the CPU time of the agent's thread
(prompt building, the SDK request, parsing, safe execution, record keeping: the pipeline's work), and the wall time
per step, which also holds the server's own handling (JSON in and out), so it is an upper bound. Per-task work
(fresh backends, the official checker) is timed apart and printed per task.

    .venv/bin/python bench/bench_pipeline_step.py [--tasks 40]
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
from amd.agent.loop import Limits, run_episode
from amd.benchmarks import get_benchmark
from amd.llm import open_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=40)
    task_ids = [f"multi_turn_base_{i}" for i in range(parser.parse_args().tasks)]
    os.environ["AMD_CACHE_DIR"] = tempfile.mkdtemp(prefix="amd-bench-")
    benchmark = get_benchmark("bfcl")
    cpu_ms, wall_ms, start_ms, score_ms, steps_total = [], [], [], [], 0
    with server_process(task_ids) as url, open_model(f"vllm:bench@{url}", {"cache": False}) as model:
        for task_id in task_ids:
            cpu_started = time.thread_time()
            episode = benchmark.start(task_id)
            start_ms.append(1000 * (time.thread_time() - cpu_started))
            scoring = timed(episode)
            started, cpu_started = time.perf_counter(), time.thread_time()
            record = run_episode(ModelAgent(model), episode, Limits())
            score_ms.append(1000 * scoring["cpu_s"])
            cpu_ms.append(1000 * (time.thread_time() - cpu_started - scoring["cpu_s"]) / record["n_steps"])
            wall_s = time.perf_counter() - started - scoring["wall_s"]
            wall_ms.append(1000 * wall_s / record["n_steps"])
            steps_total += record["n_steps"]
    print(f"per-step pipeline overhead over {len(task_ids)} BFCL tasks ({steps_total} steps), model time excluded:")
    for label, values in (("agent-thread CPU", cpu_ms), ("wall, server included", wall_ms)):
        print(f"  {label:20s} median {statistics.median(values):6.2f} ms   p90 "
              f"{statistics.quantiles(values, n=10)[-1]:6.2f} ms   (goal: median <= 2 ms)")
    print(f"per task: fresh backends {statistics.median(start_ms):.2f} ms, official checker "
          f"{statistics.median(score_ms):.2f} ms (medians, CPU)")


@contextlib.contextmanager
def server_process(task_ids):
    """The replay server in a child process; yields its base URL."""
    code = (f"import sys, time; sys.path.insert(0, {str(TESTS)!r})\n"
            "from replay_model import ground_truth_answers, replay_model\n"
            "from scripted_server import ScriptedServer\n"
            f"server = ScriptedServer(replay_model(ground_truth_answers({task_ids!r}))).__enter__()\n"
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
