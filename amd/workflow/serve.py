"""vLLM servers for jobs: one per batch of jobs that run at once against it (`amd serve-batch`, the workflow's), or
one that lives exactly as long as one command (`amd serve-run --model`).

Every server is `vllm serve MODEL --enable-prompt-tokens-details --host 127.0.0.1 --port PORT ...` on a free port
(without that flag vLLM's usage leaves out the prompt tokens its prefix cache served, which amd records per step),
on GPUs of its own (amd.workflow.devices: `--gpus` of those this machine or SLURM job offers, locked while it lives),
and it is always stopped with its whole process group, also when the job is cancelled (SIGTERM, SIGINT), and dies
with its parent when that is killed outright; so do a batch's jobs.

The workflow's way (rules/serve.smk): one Snakemake job per batch, `amd serve-batch --model M --gpus N --job LOG
COMMAND ...`: it starts the server, waits until it answers (`--startup-timeout`, an error naming what it waited
for), then starts every job of the batch at once, each COMMAND with `{base_url}` filled in and its output in LOG, and
stops the server after the last. A server that exits while serving stops the batch's jobs at once; a job that fails
fails the batch, once the others are done. By hand:

    amd serve-run --model Qwen/Qwen3-4B --serve-args "--enable-auto-tool-choice --tool-call-parser hermes" \\
        -- amd run bfcl --agent "vllm:Qwen/Qwen3-4B@{base_url}" --out run.jsonl
"""

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
from amd.core.net import free_port, wait_for_models
from amd.workflow import devices

log = logging.getLogger("amd.workflow.serve")
PLACEHOLDER = "{base_url}"
USAGE_FLAGS = ("--enable-prompt-tokens-details",)  # usage.prompt_tokens_details.cached_tokens in every reply
# Snakemake sets these to a job's `threads`: 0 for a batch's job, which runs outside --cores (rules/serve.smk).
# libgomp refuses 0 (a warning in every log): amd's CLI drops them, a batch's jobs get 1 thread each, a server its own
# default.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "GOTO_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                    "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")
POLL_S = 0.5
STOP_GRACE_S = 10.0  # a job or server that ignores SIGTERM this long is killed


def drop_zero_threads() -> None:
    """Drop THREAD_VARIABLES set to 0 (Snakemake's `threads: 0`) from this process's environment before any library
    reads them."""
    for name in THREAD_VARIABLES:
        if os.environ.get(name) == "0":
            del os.environ[name]


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


def serve_batch(server: list[str], jobs: list[tuple[Path, str]], gpus: int, startup_timeout: float = 1800.0) -> int:
    """Start `server` on `gpus` GPUs of its own, run every job at once against it once it answers, stop it after the
    last; 0 when every job succeeded. Progress lines (`jobs in flight: N`) go to the log."""
    previous = _stop_on_signals()
    running: dict[subprocess.Popen, Path] = {}
    try:
        with _devices(gpus) as env:
            process, base_url = _start(server, env)
            try:
                _wait_until_ready(process, base_url, startup_timeout)
                log.info("server for %s ready at %s (GPUs %s); starting its %d jobs", _model(server), base_url,
                         env.get("CUDA_VISIBLE_DEVICES", "as given"), len(jobs))
                running = {_start_job(command, log_file, base_url): log_file for log_file, command in jobs}
                log.info("jobs in flight: %d", len(running))
                failed = _wait_for_jobs(running, process, _model(server))
            finally:
                _stop_jobs(running)
                _stop(process)
    except SystemExit as stop:
        if stop.code in (128 + signal.SIGTERM, 128 + signal.SIGINT):
            log.info("batch of %s stopped by a signal; its server and jobs are stopped", _model(server))
        raise
    finally:
        _restore(previous)
    if failed:
        raise AmdError(f"{len(failed)} of {len(jobs)} jobs of the batch of {_model(server)} failed; see "
                       f"{', '.join(map(str, failed))}")
    log.info("server for %s stopped after its %d jobs", _model(server), len(jobs))
    return 0


def _start_job(command: str, log_file: Path, base_url: str) -> subprocess.Popen:
    """A job of the batch in a session of its own (stopped as a whole), dying with amd, its output in `log_file`."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ) | dict.fromkeys(THREAD_VARIABLES, "1")
    with open(log_file, "w") as output:
        return subprocess.Popen(fill_base_url(shlex.split(command), base_url), stdout=output, stderr=subprocess.STDOUT,
                                env=env, start_new_session=True, preexec_fn=_die_with_parent)  # noqa: PLW1509


def _wait_for_jobs(running: dict[subprocess.Popen, Path], server: subprocess.Popen, model: str) -> list[Path]:
    """Wait for every job; the logs of those that failed. A server that exits first is an error: its jobs could not
    finish."""
    pending, failed = dict(running), []
    while pending:
        if server.poll() is not None:
            raise AmdError(f"the server for {model} exited with code {server.returncode} while serving; its "
                           f"{len(pending)} jobs still running were stopped: rerun to finish them")
        for job in [job for job in pending if job.poll() is not None]:
            log_file = pending.pop(job)
            if job.returncode:
                failed.append(log_file)
            log.info("job %s ended (code %d); jobs in flight: %d", log_file, job.returncode, len(pending))
        time.sleep(POLL_S)
    return failed


def _stop_jobs(running: dict[subprocess.Popen, Path]) -> None:
    live = [job for job in running if job.poll() is None]
    for job in live:
        _signal_group(job, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    for job in live:
        try:
            job.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _signal_group(job, signal.SIGKILL)
            job.wait()


def _signal_group(process: subprocess.Popen, number: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, number)


@contextlib.contextmanager
def _devices(gpus: int | None):
    """The server's environment, with CUDA_VISIBLE_DEVICES set to `gpus` devices of its own (None: as it is)."""
    env = {name: value for name, value in os.environ.items() if not (name in THREAD_VARIABLES and value == "0")}
    if gpus is None:
        yield env
        return
    with devices.claimed(gpus) as held:
        yield env | {"CUDA_VISIBLE_DEVICES": ",".join(held)}


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


def _stop(process, grace: float = STOP_GRACE_S) -> None:
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
