"""`amd serve-batch ... --job LOG COMMAND` and `amd serve-run --model M -- COMMAND`: a vLLM server for a batch of
jobs, or for one command (amd.workflow.serve)."""

import argparse
import os
import shlex
from pathlib import Path

from amd.core.errors import AmdError
from amd.core.spec import finite_float
from amd.workflow.serve import USAGE_FLAGS, serve_and_run, serve_batch


def register(subparsers) -> None:
    batch = subparsers.add_parser("serve-batch", help="serve a model with vLLM for a batch of jobs, run them all at "
                                  "once against it, stop it after the last (a workflow job)")
    _add_server_arguments(batch)
    batch.add_argument("--job", nargs=2, action="append", required=True, metavar=("LOG", "COMMAND"),
                       help="a job of the batch: its log file and its command ({base_url} is filled in); repeated")
    batch.set_defaults(handler=_serve_batch_command)

    run = subparsers.add_parser("serve-run", help="run a command against a vLLM server started for it")
    _add_server_arguments(run)
    run.add_argument("served_command", metavar="command", nargs=argparse.REMAINDER,
                     help="-- then the command; {base_url} is filled in")
    run.set_defaults(handler=_serve_run_command)


def _add_server_arguments(parser) -> None:
    parser.add_argument("--model", required=True, help="model to serve, e.g. Qwen/Qwen3-4B")
    parser.add_argument("--serve-args", default="", help="extra `vllm serve` arguments, as one string")
    parser.add_argument("--vllm", default=os.environ.get("AMD_VLLM_BIN", "vllm"),
                        help="vllm executable (default: $AMD_VLLM_BIN or vllm)")
    parser.add_argument("--gpus", type=int, default=None,
                        help="GPUs of its own for the server, locked while it lives (serve-batch: default 1; "
                             "serve-run: default none, the devices as the environment gives them)")
    parser.add_argument("--startup-timeout", type=finite_float, default=1800.0, help="seconds to wait for the server")


def _server_argv(args) -> list[str]:
    return [args.vllm, "serve", args.model, *USAGE_FLAGS, *shlex.split(args.serve_args)]


def _serve_batch_command(args) -> int:
    gpus = 1 if args.gpus is None else args.gpus
    return serve_batch(_server_argv(args), [(Path(log_file), command) for log_file, command in args.job], gpus,
                       args.startup_timeout)


def _serve_run_command(args) -> int:
    command = args.served_command[1:] if args.served_command[:1] == ["--"] else args.served_command
    if not command:
        raise AmdError("serve-run: no command given after --")
    return serve_and_run(_server_argv(args), command, args.startup_timeout, gpus=args.gpus)
