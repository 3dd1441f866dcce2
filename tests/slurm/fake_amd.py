#!/usr/bin/env python3
"""A stand-in `amd` for workflow tests (pipeline and SLURM): same command-line contract, instant outputs.

`run`, `memory build` and `score` write small but schema-valid outputs; `table` and `figure` are the real
analysis code. Flags outside the contract are an argparse error, so a rule that passes a wrong flag fails.
Every call is appended (argv as JSON) to $FAKE_AMD_LOG when set; with $FAKE_AMD_RUN_SECONDS each `run` takes
that long and logs its start and end to $FAKE_AMD_TIMES. Declared-but-missing benchmarks fail at once.
"""

import argparse
import json
import os
import subprocess
import sys
import time

DECLARED_ONLY = {"appworld", "toolsandbox", "agentdojo"}
BANK_FILES = ("manifest.json", "workflow.jsonl", "subtask.jsonl", "function.jsonl", "workflow.faiss", "subtask.faiss")


def trajectory(task_id, benchmark, spec, memory_config, success):
    return {
        "schema": "amd.trajectory/1", "task_id": task_id, "benchmark": benchmark,
        "data_version": {"package": "fake", "sha256": "0" * 64},
        "agent": {"spec": spec, "kind": "oracle" if spec == "oracle" else "model", "model": None, "params": {}},
        "memory": {"config": memory_config}, "instruction": "fake task",
        "turns": [{"user": "fake task", "steps": [{"model_text": "", "calls": [], "observations": [], "error": False}]}],
        "decoded_calls": [], "success": success, "checker": {}, "status": "finished", "error": None,
        "n_steps": 1, "tokens": {"prompt": 1, "completion": 1}, "wall_time_s": 0.0,
    }


def run(args):
    started = time.time()
    if os.environ.get("FAKE_AMD_RUN_SECONDS"):
        time.sleep(float(os.environ["FAKE_AMD_RUN_SECONDS"]))
        with open(os.environ["FAKE_AMD_TIMES"], "a") as handle:
            handle.write(json.dumps({"agent": args.agent, "start": started, "end": time.time()}) + "\n")
    if args.benchmark in DECLARED_ONLY:
        sys.exit(f"amd: error: benchmark {args.benchmark!r} is declared but not implemented")
    tasks = args.tasks.split(",") if args.tasks else [f"multi_turn_base_{i}" for i in range(6)]
    if args.agent != "oracle" and ":" not in args.agent:
        sys.exit(f"amd: error: bad agent spec {args.agent!r}")
    with open(args.out, "w") as handle:
        for i, task in enumerate(tasks[: args.limit]):
            success = args.agent == "oracle" or (args.memory_config != "zero_shot" and i % 2 == 0)
            handle.write(json.dumps(trajectory(task, args.benchmark, args.agent, args.memory_config, success)) + "\n")


def memory_build(args):
    os.makedirs(args.out, exist_ok=True)
    for name in BANK_FILES:
        with open(os.path.join(args.out, name), "w") as handle:
            handle.write(json.dumps({"from": args.trajectories, "writer": args.writer}) + "\n")


def score(args):
    with open(args.json, "w") as handle:
        json.dump({"files": args.files}, handle)


def serve_run(args):
    """Like `amd serve-run` without a server: note the GPUs the job was given, run the command."""
    with open(os.environ.get("FAKE_AMD_LOG", os.devnull), "a") as handle:
        handle.write(json.dumps({"serve_run": args.model, "gpus": os.environ.get("SLURM_GPUS_ON_NODE")}) + "\n")
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    return subprocess.call([part.replace("{base_url}", "http://127.0.0.1:9/v1") for part in command])


def parser():
    top = argparse.ArgumentParser(prog="amd")
    commands = top.add_subparsers(dest="command", required=True)
    r = commands.add_parser("run")
    r.add_argument("benchmark")
    r.add_argument("--agent", required=True)
    r.add_argument("--out", required=True)
    for flag, kind in [("--tasks", str), ("--limit", int), ("--concurrency", int), ("--max-steps-per-turn", int),
                       ("--max-steps", int), ("--temperature", float), ("--max-tokens", int), ("--seed", int),
                       ("--memory", str), ("--protocol", str), ("--k", str), ("--delta", str),
                       ("--split-seed", int)]:
        r.add_argument(flag, type=kind)
    r.add_argument("--memory-config", default="zero_shot")
    r.add_argument("--per-turn", action="store_true")
    r.add_argument("--no-progress", action="store_true")
    r.set_defaults(handler=run)
    memory = commands.add_parser("memory").add_subparsers(dest="verb", required=True)
    b = memory.add_parser("build")
    for flag in ("--trajectories", "--writer", "--embedder", "--out"):
        b.add_argument(flag, required=True)
    b.add_argument("--representation")
    b.add_argument("--writer-params", type=json.loads)
    b.set_defaults(handler=memory_build)
    s = commands.add_parser("score")
    s.add_argument("files", nargs="+")
    s.add_argument("--json", required=True)
    s.set_defaults(handler=score)
    serve = commands.add_parser("serve-run")
    serve.add_argument("--model", required=True)
    serve.add_argument("--serve-args", default="")
    serve.add_argument("command", nargs=argparse.REMAINDER)
    serve.set_defaults(handler=serve_run)
    from amd.analysis.cli import register

    register(commands)
    return top


def main():
    if os.environ.get("FAKE_AMD_LOG"):
        with open(os.environ["FAKE_AMD_LOG"], "a") as handle:
            handle.write(json.dumps(sys.argv[1:]) + "\n")
    args = parser().parse_args()
    return args.handler(args) or 0


if __name__ == "__main__":
    sys.exit(main())
