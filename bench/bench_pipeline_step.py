"""Per-step pipeline overhead, excluding the model: real BFCL episodes, real agent loop, real SDK client, against
an instant scripted server that replays ground truth, with the response cache off so every step makes a request.
Two figures per step: the CPU time of the agent's own thread (prompt building, the SDK request, parsing, safe
execution, scoring, record keeping: the pipeline's work), and wall time minus the time the in-process server spent
inside its handlers (which also counts waiting for the server thread under the GIL, so it is an upper bound).

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
    cpu_ms, wall_ms, steps_total = [], [], 0
    with ScriptedServer(replay_model(ground_truth_answers(task_ids))) as server, \
            open_model(f"vllm:bench@{server.url}", {"cache": False}) as model:
        for task_id in task_ids:
            episode = benchmark.start(task_id)
            busy_before, started, cpu_started = server.busy_s, time.perf_counter(), time.thread_time()
            record = run_episode(ModelAgent(model), episode, Limits())
            cpu_ms.append(1000 * (time.thread_time() - cpu_started) / record["n_steps"])
            wall_s = time.perf_counter() - started - (server.busy_s - busy_before)
            wall_ms.append(1000 * wall_s / record["n_steps"])
            steps_total += record["n_steps"]
    print(f"per-step pipeline overhead over {len(task_ids)} BFCL tasks ({steps_total} steps), model time excluded:")
    for label, values in (("agent-thread CPU", cpu_ms), ("wall - server time", wall_ms)):
        print(f"  {label:20s} median {statistics.median(values):6.2f} ms   p90 "
              f"{statistics.quantiles(values, n=10)[-1]:6.2f} ms   (goal: median <= 2 ms)")


if __name__ == "__main__":
    main()
