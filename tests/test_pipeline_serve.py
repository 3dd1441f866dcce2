"""`amd serve-run` and `amd serve` with a fake `vllm` executable: the command gets the live URL, the server always
stops; a shared server's file says where it is, or why it will not come."""

import argparse
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from amd.core.errors import AmdError
from amd.workflow.serve import register, serve_and_run, serve_until_stopped, wait_for_server_file

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


def test_a_shared_server_names_its_url_serves_on_its_own_gpu_and_stops_on_sigterm(fake_vllm, tmp_path):
    url_file = tmp_path / "server.url"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "4,7", "AMD_GPU_LOCK_DIR": str(tmp_path / "locks")}
    serving = subprocess.Popen([sys.executable, "-m", "amd.cli", "serve", "--model", "m", "--vllm", str(fake_vllm),
                                "--gpus", "1", "--url-file", str(url_file)], env=env)
    try:
        base_url = wait_for_server_file(url_file, timeout=60)
        subprocess.run([sys.executable, "-c", CLIENT, base_url, str(tmp_path / "answer.json")], check=True)
        assert json.loads((tmp_path / "answer.json").read_text())["data"][0]["devices"] == "4"
    finally:
        serving.send_signal(signal.SIGTERM)
        assert serving.wait(timeout=60) == 0
    assert not _alive(int((tmp_path / "server.pid").read_text()))


def test_a_server_that_never_comes_is_one_clear_line_for_the_jobs_waiting_for_it(fake_vllm, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_VLLM_FAIL", "1")
    url_file = tmp_path / "server.url"
    with pytest.raises(AmdError, match="exited with code 3"):
        serve_until_stopped([str(fake_vllm), "serve", "m"], url_file, gpus=0, startup_timeout=30)
    with pytest.raises(AmdError, match=r"the server of .*server.url failed: the server exited with code 3"):
        wait_for_server_file(url_file, timeout=5)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])  # its `amd serve` died before it wrote a URL
    gone.wait()
    url_file.write_text(f"starting {gone.pid}\n")
    with pytest.raises(AmdError, match="exited before it was ready"):
        wait_for_server_file(url_file, timeout=5)
