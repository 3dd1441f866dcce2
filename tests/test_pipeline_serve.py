"""`amd serve-run` and `amd serve-batch` with a fake `vllm` executable: the command (every job of a batch, at once)
gets the live URL, the server always stops; a server that never answers is one line naming what was awaited."""

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
import time

import pytest

from amd.cli.serve import register
from amd.core.errors import AmdError
from amd.workflow.serve import serve_and_run

FAKE_VLLM = textwrap.dedent("""\
    #!{python}
    # Stand-in for `vllm serve MODEL ... --host H --port P`: answers /v1/models after a short delay.
    import http.server, json, os, sys, time
    args = sys.argv[1:]
    open(os.environ["FAKE_VLLM_PIDFILE"], "w").write(str(os.getpid()))
    if os.environ.get("FAKE_VLLM_FAIL"):
        sys.exit(3)
    port = int(args[args.index("--port") + 1])
    model = args[1]
    time.sleep(0.3)
    if os.environ.get("FAKE_VLLM_SILENT"):
        time.sleep(3600)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({{"data": [{{"id": model, "args": args,
                                           "devices": os.environ.get("CUDA_VISIBLE_DEVICES")}}]}}).encode()
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
""")

# The "command" run against the server: fetch /models from the URL it was given and save the answer.
CLIENT = "import sys, urllib.request; open(sys.argv[2], 'wb').write(urllib.request.urlopen(sys.argv[1] + '/models').read())"


@pytest.fixture
def fake_vllm(tmp_path, monkeypatch):
    path = tmp_path / "vllm"
    path.write_text(FAKE_VLLM.format(python=sys.executable))
    path.chmod(0o755)
    monkeypatch.setenv("FAKE_VLLM_PIDFILE", str(tmp_path / "server.pid"))
    return path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_command_reaches_the_server_by_its_url_and_the_server_stops(fake_vllm, tmp_path):
    answer = tmp_path / "answer.json"
    code = serve_and_run([str(fake_vllm), "serve", "Qwen/Qwen3-4B", "--tool-call-parser", "hermes"],
                         [sys.executable, "-c", CLIENT, "{base_url}", str(answer)], startup_timeout=30)
    assert code == 0
    text = answer.read_text()
    assert "Qwen/Qwen3-4B" in text and "hermes" in text
    pid = int((tmp_path / "server.pid").read_text())
    time.sleep(0.1)
    assert not _alive(pid)


def test_the_commands_exit_code_is_returned_and_the_server_still_stops(fake_vllm, tmp_path):
    code = serve_and_run([str(fake_vllm), "serve", "m"], [sys.executable, "-c", "raise SystemExit(7)"],
                         startup_timeout=30)
    assert code == 7
    assert not _alive(int((tmp_path / "server.pid").read_text()))


def test_a_server_that_dies_at_start_is_a_clear_error_and_the_command_never_runs(fake_vllm, tmp_path,
                                                                                 monkeypatch):
    monkeypatch.setenv("FAKE_VLLM_FAIL", "1")
    marker = tmp_path / "ran"
    with pytest.raises(AmdError, match="exited with code 3 before it was ready"):
        serve_and_run([str(fake_vllm), "serve", "m"], [sys.executable, "-c", f"open({str(marker)!r}, 'w')"],
                      startup_timeout=30)
    assert not marker.exists()


def test_cli_entry_substitutes_the_url_and_names_a_missing_executable(fake_vllm, tmp_path):
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    answer = tmp_path / "answer.json"
    args = parser.parse_args(["serve-run", "--model", "Qwen/Qwen3-8B", "--vllm", str(fake_vllm),
                              "--serve-args", "--max-model-len 8192", "--",
                              sys.executable, "-c", CLIENT, "{base_url}", str(answer)])
    assert args.handler(args) == 0
    served_args = json.loads(answer.read_text())["data"][0]["args"]
    assert "8192" in served_args and "--enable-prompt-tokens-details" in served_args
    args = parser.parse_args(["serve-run", "--model", "m", "--vllm", str(tmp_path / "no-vllm"), "--", "true"])
    with pytest.raises(AmdError, match="not found"):
        args.handler(args)


def batch(fake_vllm, tmp_path, *jobs: str, startup_timeout: float = 60) -> subprocess.CompletedProcess:
    """`amd serve-batch` on one of two listed GPUs, each job a Python one-liner against {base_url}."""
    argv = [sys.executable, "-m", "amd.cli", "serve-batch", "--model", "m", "--vllm", str(fake_vllm), "--gpus", "1",
            "--startup-timeout", str(startup_timeout)]
    for index, job in enumerate(jobs):
        argv += ["--job", str(tmp_path / f"job{index}.log"), f"{sys.executable} -c {shlex.quote(job)} {{base_url}}"]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "4,7", "AMD_GPU_LOCK_DIR": str(tmp_path / "locks"),
           "OMP_NUM_THREADS": "0"}
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)


# Each job: note when it starts, wait until every job of the batch has started (or 20 s), ask the server.
TOGETHER = textwrap.dedent("""    import os, sys, time, urllib.request
    folder = {folder!r}
    open(os.path.join(folder, f"started-{{os.getpid()}}"), "w").close()
    deadline = time.time() + 20
    while len([n for n in os.listdir(folder) if n.startswith("started-")]) < {jobs} and time.time() < deadline:
        time.sleep(0.05)
    together = len([n for n in os.listdir(folder) if n.startswith("started-")]) == {jobs}
    answer = urllib.request.urlopen(sys.argv[1] + "/models").read().decode()
    print("together" if together else "alone", answer, os.environ.get("OMP_NUM_THREADS"))
    """)


def test_a_batch_runs_its_jobs_at_once_against_its_server_on_its_own_gpu_then_stops_it(fake_vllm, tmp_path):
    job = TOGETHER.format(folder=str(tmp_path), jobs=3)
    done = batch(fake_vllm, tmp_path, job, job, job)
    assert done.returncode == 0, done.stderr[-2000:]
    logs = [(tmp_path / f"job{index}.log").read_text() for index in range(3)]
    assert all(text.startswith("together") and '"devices": "4"' in text for text in logs), logs
    assert all(text.split()[-1] == "1" for text in logs)  # one thread each, never libgomp's refused 0
    assert "libgomp" not in done.stderr and "jobs in flight: 3" in done.stderr
    assert not _alive(int((tmp_path / "server.pid").read_text()))


def test_a_failed_job_fails_the_batch_naming_its_log_after_the_others_and_stops_the_server(fake_vllm, tmp_path):
    done = batch(fake_vllm, tmp_path, "import sys; sys.exit(5)", "import time; time.sleep(1); print('finished')")
    assert done.returncode == 2 and done.stderr.strip().splitlines()[-1] == (
        f"amd: error: 1 of 2 jobs of the batch of m failed; see {tmp_path / 'job0.log'}")
    assert (tmp_path / "job1.log").read_text().strip() == "finished"
    assert not _alive(int((tmp_path / "server.pid").read_text()))


def test_a_server_that_never_answers_is_one_line_naming_what_was_awaited_and_no_job_runs(fake_vllm, tmp_path,
                                                                                      monkeypatch):
    monkeypatch.setenv("FAKE_VLLM_FAIL", "1")
    done = batch(fake_vllm, tmp_path, f"open({str(tmp_path / 'ran')!r}, 'w')")
    assert done.returncode == 2 and done.stderr.strip().splitlines()[-1] == (
        "amd: error: the server exited with code 3 before it was ready")
    assert not (tmp_path / "ran").exists()
    monkeypatch.setenv("FAKE_VLLM_FAIL", "")
    monkeypatch.setenv("FAKE_VLLM_SILENT", "1")
    done = batch(fake_vllm, tmp_path, f"open({str(tmp_path / 'ran')!r}, 'w')", startup_timeout=2)
    assert done.returncode == 2 and re.search(r"amd: error: no answer from http://127\.0\.0\.1:\d+/v1/models "
                                              r"within 2 s$", done.stderr.strip())
    assert not (tmp_path / "ran").exists()
