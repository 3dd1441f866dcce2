#!/usr/bin/env python3
"""A stand-in `vllm` for workflow tests: `vllm serve MODEL ... --host H --port P` serves the scripted
OpenAI-compatible server (tests/scripted_server.py) on that port until SIGTERM, and appends its life to
$STAND_IN_VLLM_LOG (JSON lines: start and stop, its model, pid and the CUDA_VISIBLE_DEVICES it was given).

Its replies: with $STAND_IN_VLLM_BFCL_TASKS (comma-separated BFCL task ids), those tasks' ground-truth calls
replayed (tests/replay_model.py) and "Nothing to do." for any other task, the same reply for the same request
whatever else the server serves; else an echo. $STAND_IN_VLLM_LATENCY_S delays every reply.
"""

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scripted_server import ScriptedServer, echo_last_user


def log(event: str, model: str) -> None:
    entry = {"event": event, "model": model, "pid": os.getpid(), "time": time.time(),
             "devices": os.environ.get("CUDA_VISIBLE_DEVICES"), "slurm_job": os.environ.get("SLURM_JOB_ID")}
    with open(os.environ.get("STAND_IN_VLLM_LOG", os.devnull), "a") as handle:
        handle.write(json.dumps(entry) + "\n")


def replies():
    tasks = os.environ.get("STAND_IN_VLLM_BFCL_TASKS")
    if not tasks:
        return echo_last_user
    from replay_model import ground_truth_answers, replay_model

    replay = replay_model(ground_truth_answers(tasks.split(",")))

    def respond(request):
        try:
            return replay(request)
        except KeyError:  # a task it has no answers for: it does nothing (and fails the task)
            return "Nothing to do."

    return respond


def main(argv: list[str]) -> None:
    assert argv[0] == "serve", argv
    model, port = argv[1], int(argv[argv.index("--port") + 1])
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    latency = float(os.environ.get("STAND_IN_VLLM_LATENCY_S", "0"))
    # /models as vLLM answers it: the name served and, as its root, what was given to `vllm serve`
    with ScriptedServer(replies(), model=model, root=model, port=port, cached_tokens=0, latency_s=latency):
        log("start", model)
        stopped.wait()
    log("stop", model)


if __name__ == "__main__":
    main(sys.argv[1:])
