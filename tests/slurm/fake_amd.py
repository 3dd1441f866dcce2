#!/usr/bin/env python3
"""A stand-in `amd` for workflow tests (pipeline and SLURM): the real command line, instant outputs.

Arguments are parsed by amd's own parser, so a rule that passes a flag `amd` does not accept fails here too;
`run`, `probe`, `memory build|pool` and `score` then write small but schema-valid outputs instead of working (an
attacked run's records with a security verdict), and `table`,
`figure` and `view` run the real analysis code (`view` without the bank: a fake bank holds no entries). Every call is appended (argv as JSON) to $FAKE_AMD_LOG when set; with
$FAKE_AMD_RUN_SECONDS each `run` takes that long and logs its start and end to $FAKE_AMD_TIMES. A run of a served
model asks its server for /models first and logs which server it reached. `serve` and `serve-run` are the real
ones (with a stand-in `vllm`, tests/stand_in_vllm.py). Declared but unavailable benchmarks fail at once, as they do
for real.
"""

import json
import os
import sys
import time
import urllib.request
from pathlib import Path

from amd.cli import build_parser
from amd.core.registry import BENCHMARKS


def trajectory(task_id, benchmark, spec, memory, success):
    return {
        "schema": "amd.trajectory/1", "task_id": task_id, "benchmark": benchmark,
        "data_version": {"package": "fake", "sha256": "0" * 64},
        "agent": {"spec": spec, "kind": "oracle" if spec == "oracle" else "model", "model": None, "params": {}},
        "memory": memory, "instruction": "fake task",
        "turns": [{"user": "fake task", "steps": [{"model_text": "", "calls": [], "observations": [], "error": False}]}],
        "decoded_calls": [], "success": success, "checker": {}, "status": "finished", "error": None,
        "n_steps": 1, "tokens": {"prompt": 1, "completion": 1}, "wall_time_s": 0.0,
    }


def run(args):
    started = time.time()
    if "@http" in args.agent:  # a served model: ask its server, as a real run would, and note which one answered
        base_url = args.agent.split("@", 1)[1]
        urllib.request.urlopen(f"{base_url}/models", timeout=10).read()
        with open(os.environ.get("FAKE_AMD_LOG", os.devnull), "a") as handle:
            handle.write(json.dumps({"served_run": args.out, "base_url": base_url, "start": started,
                                     "slurm_job": os.environ.get("SLURM_JOB_ID")}) + "\n")
    if os.environ.get("FAKE_AMD_RUN_SECONDS"):
        time.sleep(float(os.environ["FAKE_AMD_RUN_SECONDS"]))
        with open(os.environ["FAKE_AMD_TIMES"], "a") as handle:
            handle.write(json.dumps({"agent": args.agent, "start": started, "end": time.time()}) + "\n")
    if BENCHMARKS.entry(args.benchmark).target is None:
        sys.exit(f"amd: error: benchmark {args.benchmark!r} is declared but cannot run here")
    tasks = args.tasks.split(",") if args.tasks else [f"multi_turn_base_{i}" for i in range(6)]
    if args.agent != "oracle" and ":" not in args.agent:
        sys.exit(f"amd: error: bad agent spec {args.agent!r}")
    memory = {"config": args.memory_config}
    bank = json.loads(Path(args.memory, "manifest.json").read_text()) if args.memory else {}
    if "teachers" in bank:  # a pooled bank: the run records its teachers and the preferred one
        prefer = dict(option.split("=", 1) for option in args.memory_option).get("prefer_teacher")
        memory["pool"] = {"teachers": bank["teachers"], "prefer_teacher": prefer,
                          "tasks_by_teacher": {prefer or bank["teachers"][0]: len(tasks)}}
    attacked = any(option.startswith("attack=") for option in args.benchmark_option)
    with open(args.out, "w") as handle:
        for i, task in enumerate(tasks[: args.limit]):
            success = args.agent == "oracle" or (args.memory_config != "zero_shot" and i % 2 == 0)
            record = trajectory(task, args.benchmark, args.agent, memory, success)
            if attacked:  # a prompt-injection pair: whether the attacker's goal was reached
                record["checker"]["security"] = i % 3 == 0
            handle.write(json.dumps(record) + "\n")


def probe(args):
    """`amd probe`: a run on the first --probe-size tasks (the real draw is amd.cli.probe's, tested on its own)."""
    args.limit = args.probe_size or args.limit
    return run(args)


def memory(args):
    os.makedirs(args.out, exist_ok=True)
    made = ({"from": args.trajectories, "method": args.method, "writer": args.writer}
            if args.memory_command == "build" else {"banks": args.banks, "teachers": args.teachers})
    with open(os.path.join(args.out, "manifest.json"), "w") as handle:
        handle.write(json.dumps(made) + "\n")


def score(args):
    with open(args.json, "w") as handle:
        json.dump({"files": args.files}, handle)


def view(args):
    args.bank = None
    return args.handler(args)


FAKES = {"run": run, "probe": probe, "memory": memory, "score": score, "view": view}


def main():
    if os.environ.get("FAKE_AMD_LOG"):
        with open(os.environ["FAKE_AMD_LOG"], "a") as handle:
            handle.write(json.dumps(sys.argv[1:]) + "\n")
    args = build_parser().parse_args()
    return FAKES.get(args.command, args.handler)(args) or 0


if __name__ == "__main__":
    sys.exit(main())
