"""Model requests made by a rerun of a finished run (goal: 0): once with the output kept (finished tasks are
skipped), once with the output deleted (every reply comes from the on-disk response cache).

    .venv/bin/python bench/bench_rerun_requests.py [--tasks 10]
"""

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from replay_model import ground_truth_answers, replay_model
from scripted_server import ScriptedServer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10)
    task_ids = [f"multi_turn_base_{i}" for i in range(parser.parse_args().tasks)]
    work = Path(tempfile.mkdtemp(prefix="amd-bench-"))
    out = work / "run.jsonl"
    env = {**os.environ, "AMD_CACHE_DIR": str(work / "cache")}
    with ScriptedServer(replay_model(ground_truth_answers(task_ids))) as server:
        argv = [sys.executable, "-m", "amd.cli", "run", "bfcl", "--agent", f"vllm:bench@{server.url}",
                "--tasks", ",".join(task_ids), "--out", str(out), "--no-progress"]
        counts = []
        for delete_output in (False, False, True):
            if delete_output:
                out.unlink()
            before = len(server.chat_requests())
            subprocess.run(argv, env=env, check=True, capture_output=True)
            counts.append(len(server.chat_requests()) - before)
    print(f"model requests over {len(task_ids)} BFCL tasks: first run {counts[0]}, "
          f"rerun {counts[1]} (goal 0), rerun with the output deleted {counts[2]} (goal 0)")


if __name__ == "__main__":
    main()
