"""Per-step pipeline overhead, excluding the model: real BFCL episodes, real agent loop, real SDK client, against
an instant scripted server that replays ground truth, with the response cache off so every step makes a request.
Two figures per step: the CPU time of the agent's own thread (prompt building, the SDK request, parsing, safe
execution, record keeping: the pipeline's work), and wall time minus the time the in-process server spent inside
its handlers (which also counts waiting for the server thread under the GIL, so it is an upper bound). Per-task
work (fresh backends, the official checker) is timed apart and printed per task.

    .venv/bin/python bench/bench_pipeline_step.py [--tasks 40]
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from replay_model import ground_truth_answers, replay_model  # noqa: E402
from scripted_server import ScriptedServer  # noqa: E402

from amd.agent.agents import ModelAgent  # noqa: E402
from amd.agent.loop import Limits, run_episode  # noqa: E402
from amd.benchmarks import get_benchmark  # noqa: E402
from amd.llm import open_model  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=40)
    task_ids = [f"multi_turn_base_{i}" for i in range(parser.parse_args().tasks)]
    os.environ["AMD_CACHE_DIR"] = tempfile.mkdtemp(prefix="amd-bench-")
    benchmark = get_benchmark("bfcl")
    cpu_ms, wall_ms, start_ms, score_ms, steps_total = [], [], [], [], 0
    with ScriptedServer(replay_model(ground_truth_answers(task_ids))) as server, \
            open_model(f"vllm:bench@{server.url}", {"cache": False}) as model:
        for task_id in task_ids:
            cpu_started = time.thread_time()
            episode = benchmark.start(task_id)
            start_ms.append(1000 * (time.thread_time() - cpu_started))
            scoring = timed(episode)
            busy_before, started, cpu_started = server.busy_s, time.perf_counter(), time.thread_time()
            record = run_episode(ModelAgent(model), episode, Limits())
            score_ms.append(1000 * scoring["cpu_s"])
            cpu_ms.append(1000 * (time.thread_time() - cpu_started - scoring["cpu_s"]) / record["n_steps"])
            wall_s = time.perf_counter() - started - (server.busy_s - busy_before) - scoring["wall_s"]
            wall_ms.append(1000 * wall_s / record["n_steps"])
            steps_total += record["n_steps"]
    print(f"per-step pipeline overhead over {len(task_ids)} BFCL tasks ({steps_total} steps), model time excluded:")
    for label, values in (("agent-thread CPU", cpu_ms), ("wall - server time", wall_ms)):
        print(f"  {label:20s} median {statistics.median(values):6.2f} ms   p90 "
              f"{statistics.quantiles(values, n=10)[-1]:6.2f} ms   (goal: median <= 2 ms)")
    print(f"per task: fresh backends {statistics.median(start_ms):.2f} ms, official checker "
          f"{statistics.median(score_ms):.2f} ms (medians, CPU)")


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
