"""`amd serve-run`: run one command against a vLLM server that lives exactly as long as the command.

Starts `vllm serve MODEL --enable-prompt-tokens-details --host 127.0.0.1 --port PORT ...` on a free port (without
that flag vLLM's usage leaves out the prompt tokens its prefix cache served, which amd records per step), waits
until /v1/models answers, runs the command with every `{base_url}` in its arguments replaced by
http://127.0.0.1:PORT/v1, and always stops the server (its whole process group) afterwards, also when the job is
cancelled (SIGTERM).

    amd serve-run --model Qwen/Qwen3-4B --serve-args "--enable-auto-tool-choice --tool-call-parser hermes" \\
        -- amd run bfcl --agent "vllm:Qwen/Qwen3-4B@{base_url}" --out run.jsonl
"""

import argparse
import logging
import os
import shlex
import signal
import subprocess
import sys

from amd.errors import AmdError
from amd.net import free_port, wait_for_models

log = logging.getLogger("amd.serve")
PLACEHOLDER = "{base_url}"
USAGE_FLAGS = ("--enable-prompt-tokens-details",)  # usage.prompt_tokens_details.cached_tokens in every reply


def register(subparsers) -> None:
    serve = subparsers.add_parser("serve-run", help="run a command against a vLLM server started for it")
    serve.add_argument("--model", required=True, help="model to serve, e.g. Qwen/Qwen3-4B")
    serve.add_argument("--serve-args", default="", help="extra `vllm serve` arguments, as one string")
    serve.add_argument("--vllm", default=os.environ.get("AMD_VLLM_BIN", "vllm"),
                       help="vllm executable (default: $AMD_VLLM_BIN or vllm)")
    serve.add_argument("--startup-timeout", type=float, default=1800.0, help="seconds to wait for the server")
    serve.add_argument("served_command", metavar="command", nargs=argparse.REMAINDER,
                       help="-- then the command; {base_url} is filled in")
    serve.set_defaults(handler=_serve_run_command)


def _serve_run_command(args) -> int:
    command = args.served_command[1:] if args.served_command[:1] == ["--"] else args.served_command
    if not command:
        raise AmdError("serve-run: no command given after --")
    server = [args.vllm, "serve", args.model, *USAGE_FLAGS, *shlex.split(args.serve_args)]
    return serve_and_run(server, command, startup_timeout=args.startup_timeout)


def serve_and_run(server: list[str], command: list[str], startup_timeout: float = 1800.0) -> int:
    """Start `server` (host and port appended), run `command` once it answers, stop it; return the command's code."""
    port = free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        process = subprocess.Popen([*server, "--host", "127.0.0.1", "--port", str(port)], start_new_session=True)
    except FileNotFoundError:
        raise AmdError(f"serve-run: server executable {server[0]!r} not found (install vllm or set --vllm)") from None
    previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        _wait_until_ready(process, base_url, startup_timeout)
        log.info("server for %s ready at %s", server[2] if len(server) > 2 else server[0], base_url)
        return subprocess.call([part.replace(PLACEHOLDER, base_url) for part in command])
    finally:
        _stop(process)
        signal.signal(signal.SIGTERM, previous)


def _exit_on_sigterm(signum, frame):
    raise SystemExit(128 + signum)


def _wait_until_ready(process, base_url: str, timeout: float) -> None:
    if not wait_for_models(base_url, timeout, alive=lambda: process.poll() is None):
        if process.poll() is not None:
            raise AmdError(f"serve-run: the server exited with code {process.returncode} before it was ready")
        raise AmdError(f"serve-run: no answer from {base_url}/models within {timeout:.0f} s")


def _stop(process, grace: float = 30.0) -> None:
    """SIGTERM the server's process group, SIGKILL it after `grace` seconds, and reap leftover workers."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=grace)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        print(f"amd serve-run: server pid {process.pid} ignored SIGTERM; killing it", file=sys.stderr)
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()
