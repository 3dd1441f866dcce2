"""vLLM servers for jobs: one shared by many jobs (`amd serve` + `amd serve-run --server-file`), or one that lives
exactly as long as one command (`amd serve-run --model`).

Every server is `vllm serve MODEL --enable-prompt-tokens-details --host 127.0.0.1 --port PORT ...` on a free port
(without that flag vLLM's usage leaves out the prompt tokens its prefix cache served, which amd records per step),
on GPUs of its own (amd.workflow.devices: `--gpus` of those this machine or SLURM job offers, locked while it lives), and it
is always stopped with its whole process group, also when the job is cancelled (SIGTERM), and dies with its parent
when that is killed outright.

The workflow's way (rules/serve.smk): `amd serve ... --url-file F` is a Snakemake service job; it writes the
server's URL to F once the server answers (before: `starting PID`; or `failed: REASON`) and serves until it is
terminated. Each job of its
batch runs `amd serve-run --server-file F -- COMMAND`, which waits for that URL and runs COMMAND with every
`{base_url}` replaced by it. By hand:

    amd serve-run --model Qwen/Qwen3-4B --serve-args "--enable-auto-tool-choice --tool-call-parser hermes" \\
        -- amd run bfcl --agent "vllm:Qwen/Qwen3-4B@{base_url}" --out run.jsonl
"""

import argparse
import contextlib
import ctypes
import logging
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from amd.core.errors import AmdError
from amd.core.files import atomic_file
from amd.core.net import free_port, wait_for_models
from amd.core.spec import finite_float
from amd.workflow import devices

log = logging.getLogger("amd.workflow.serve")
PLACEHOLDER = "{base_url}"
USAGE_FLAGS = ("--enable-prompt-tokens-details",)  # usage.prompt_tokens_details.cached_tokens in every reply
STARTING, FAILED = "starting ", "failed: "  # a server file's content before its URL, or instead of it
# Snakemake sets these to a job's `threads`: 0 for a served batch's jobs, which run at once outside --cores
# (rules/serve.smk). libgomp refuses 0: a command gets 1 thread instead, a server its own default.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "GOTO_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                    "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")


def register(subparsers) -> None:
    serve = subparsers.add_parser("serve", help="serve a model with vLLM for the jobs of a batch until terminated "
                                  "(a Snakemake service job)")
    _add_server_arguments(serve)
    serve.add_argument("--url-file", required=True, help="written with the server's base URL once it answers")
    serve.set_defaults(handler=_serve_command)

    run = subparsers.add_parser("serve-run", help="run a command against a vLLM server: one started for it "
                                "(--model), or a running one (--server-file)")
    _add_server_arguments(run, required=False)
    run.add_argument("--server-file", help="a file `amd serve` writes the server's URL to: wait for it, use it")
    run.add_argument("served_command", metavar="command", nargs=argparse.REMAINDER,
                     help="-- then the command; {base_url} is filled in")
    run.set_defaults(handler=_serve_run_command)


def _add_server_arguments(parser, required: bool = True) -> None:
    parser.add_argument("--model", required=required, help="model to serve, e.g. Qwen/Qwen3-4B")
    parser.add_argument("--serve-args", default="", help="extra `vllm serve` arguments, as one string")
    parser.add_argument("--vllm", default=os.environ.get("AMD_VLLM_BIN", "vllm"),
                        help="vllm executable (default: $AMD_VLLM_BIN or vllm)")
    parser.add_argument("--gpus", type=int, default=None,
                        help="GPUs of its own for the server, locked while it lives (amd serve: default 1; "
                             "serve-run: default none, the devices as the environment gives them)")
    parser.add_argument("--startup-timeout", type=finite_float, default=1800.0, help="seconds to wait for the server")


def _server_argv(args) -> list[str]:
    return [args.vllm, "serve", args.model, *USAGE_FLAGS, *shlex.split(args.serve_args)]


def _serve_command(args) -> int:
    gpus = 1 if args.gpus is None else args.gpus
    return serve_until_stopped(_server_argv(args), Path(args.url_file), gpus, args.startup_timeout)


def _serve_run_command(args) -> int:
    command = args.served_command[1:] if args.served_command[:1] == ["--"] else args.served_command
    if not command:
        raise AmdError("serve-run: no command given after --")
    if (args.model is None) == (args.server_file is None):
        raise AmdError("serve-run: give either --model (start a server for the command) or --server-file")
    if args.server_file:
        base_url = wait_for_server_file(Path(args.server_file), args.startup_timeout)
        return subprocess.call(fill_base_url(command, base_url), env=_threads_given(dict(os.environ), "1"))
    return serve_and_run(_server_argv(args), command, args.startup_timeout, gpus=args.gpus)


def fill_base_url(command: list[str], base_url: str) -> list[str]:
    return [part.replace(PLACEHOLDER, base_url) for part in command]


def serve_and_run(server: list[str], command: list[str], startup_timeout: float = 1800.0,
                  gpus: int | None = None) -> int:
    """Start `server` (host and port appended), run `command` once it answers, stop it; return the command's code.
    With `gpus`, the server gets that many devices of its own (amd.workflow.devices)."""
    with _devices(gpus) as env:
        process, base_url = _start(server, env)
        previous = _stop_on_signals()
        try:
            _wait_until_ready(process, base_url, startup_timeout)
            log.info("server for %s ready at %s", _model(server), base_url)
            return subprocess.call(fill_base_url(command, base_url))
        finally:
            _stop(process)
            _restore(previous)


def serve_until_stopped(server: list[str], url_file: Path, gpus: int, startup_timeout: float = 1800.0) -> int:
    """Serve until SIGTERM or SIGINT (then 0), or until the server exits by itself (then 1). `url_file` says
    `starting PID` at once, the base URL once the server answers, or `failed: REASON` where it never will."""
    url_file.parent.mkdir(parents=True, exist_ok=True)
    _write(url_file, f"{STARTING}{os.getpid()}")
    previous = _stop_on_signals()
    try:
        with _devices(gpus) as env:
            process, base_url = _start(server, env)
            try:
                _wait_until_ready(process, base_url, startup_timeout)
                log.info("server for %s ready at %s (GPUs %s)", _model(server), base_url,
                         env.get("CUDA_VISIBLE_DEVICES", "as given"))
                _write(url_file, base_url)
                code = process.wait()
                raise AmdError(f"the server for {_model(server)} exited with code {code} while serving")
            finally:
                _stop(process)
    except AmdError as error:
        _write(url_file, f"{FAILED}{error}")
        raise
    except SystemExit as stop:
        if stop.code not in (128 + signal.SIGTERM, 128 + signal.SIGINT):
            raise
        log.info("server for %s stopped", _model(server))
        return 0
    finally:
        _restore(previous)


def wait_for_server_file(path: Path, timeout: float) -> str:
    """The base URL in `path` once its server answers; a clear error where it failed or its `amd serve` is gone.
    Waits as long as that process lives (it may wait for GPUs other servers hold), and `timeout` seconds for the
    file to appear."""
    deadline = time.monotonic() + timeout
    while True:
        text = path.read_text().strip() if path.exists() else ""
        if text.startswith(FAILED):
            raise AmdError(f"serve-run: the server of {path} failed: {text.removeprefix(FAILED)}")
        if text.startswith(STARTING):
            if not _alive(int(text.removeprefix(STARTING))):
                raise AmdError(f"serve-run: the server of {path} (amd serve) exited before it was ready")
        elif text and wait_for_models(text, timeout=10):
            return text
        elif time.monotonic() > deadline:
            raise AmdError(f"serve-run: no server answered in {path} within {timeout:.0f} s")
        time.sleep(1.0)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def _devices(gpus: int | None):
    """The server's environment, with CUDA_VISIBLE_DEVICES set to `gpus` devices of its own (None: as it is)."""
    env = _threads_given(dict(os.environ), None)
    if gpus is None:
        yield env
        return
    with devices.claimed(gpus) as held:
        yield env | {"CUDA_VISIBLE_DEVICES": ",".join(held)}


def _threads_given(env: dict, instead_of_zero: str | None) -> dict:
    """`env` with each THREAD_VARIABLES entry of 0 set to `instead_of_zero` (None: left out)."""
    for name in THREAD_VARIABLES:
        if env.get(name) == "0":
            if instead_of_zero is None:
                del env[name]
            else:
                env[name] = instead_of_zero
    return env


def _start(server: list[str], env: dict) -> tuple[subprocess.Popen, str]:
    port = free_port()
    try:
        process = subprocess.Popen([*server, "--host", "127.0.0.1", "--port", str(port)], env=env,
                                   start_new_session=True, preexec_fn=_die_with_parent)  # noqa: PLW1509
    except FileNotFoundError:
        raise AmdError(f"server executable {server[0]!r} not found (install vllm or set --vllm)") from None
    return process, f"http://127.0.0.1:{port}/v1"


def _die_with_parent() -> None:
    """In the server's process: SIGTERM it when amd dies, even by SIGKILL (Linux prctl PR_SET_PDEATHSIG), so that a
    job Snakemake kills never leaves a server holding a GPU. (amd starts servers from its only thread, where
    preexec_fn is safe.)"""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)


def _model(server: list[str]) -> str:
    return server[2] if len(server) > 2 else server[0]


def _write(path: Path, text: str) -> None:
    """Write whole: a reader sees the old content or the new one, never a part."""
    with atomic_file(path, durable=False) as handle:
        handle.write(text + "\n")


def _stop_on_signals() -> dict:
    return {number: signal.signal(number, _exit_on_signal) for number in (signal.SIGTERM, signal.SIGINT)}


def _restore(previous: dict) -> None:
    for number, handler in previous.items():
        signal.signal(number, handler)


def _exit_on_signal(signum, frame):
    raise SystemExit(128 + signum)


def _wait_until_ready(process, base_url: str, timeout: float) -> None:
    if not wait_for_models(base_url, timeout, alive=lambda: process.poll() is None):
        if process.poll() is not None:
            raise AmdError(f"the server exited with code {process.returncode} before it was ready")
        raise AmdError(f"no answer from {base_url}/models within {timeout:.0f} s")


def _stop(process, grace: float = 30.0) -> None:
    """SIGTERM the server's process group, SIGKILL it after `grace` seconds, and reap leftover workers."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=grace)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        print(f"amd: server pid {process.pid} ignored SIGTERM; killing it", file=sys.stderr)
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()
