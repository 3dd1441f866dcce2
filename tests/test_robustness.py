"""Faults, crashes and secrets, end to end through `amd run` on real BFCL tasks.

The model is a scripted OpenAI-compatible server on 127.0.0.1 that answers each user turn with that turn's
ground-truth calls (as a Python call list, through the text parser) and then closes the turn; its answers depend
only on the conversation, so any two runs must agree task by task.
"""

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from replay_model import OBSERVATION_PREFIX, ground_truth_answers, replay_model
from scripted_server import Fault, ScriptedServer

from amd.core.net import free_port, wait_for_models

TASKS = [f"multi_turn_base_{i}" for i in range(20)]


def flaky(respond, rate: float, seed: int):
    """Answer `rate` of requests with a fault: 429 (Retry-After), 500, timeout, garbage body, dropped connection."""
    rng, faults = random.Random(seed), [Fault(status=429, retry_after="0"), Fault(status=500), Fault(delay_s=1.5),
                                        Fault(body="<html>bad gateway</html>", content_type="text/html"),
                                        Fault(body='{"choices": []}'), Fault(drop=True)]

    def maybe_fault(request):
        return rng.choice(faults) if rng.random() < rate else respond(request)

    return maybe_fault


def amd_run(url: str, out: Path, cache: Path, *extra, background=False, env_extra=None):
    argv = [sys.executable, "-m", "amd.cli", "run", "bfcl", "--agent", f"vllm:scripted@{url}",
            "--tasks", ",".join(TASKS), "--out", str(out), "--request-timeout", "1",
            "--max-retries", "8", *extra]
    env = {**os.environ, "AMD_CACHE_DIR": str(cache), **(env_extra or {})}
    if background:
        return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def verdicts(path: Path) -> dict:
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(records) == len({r["task_id"] for r in records}), "a task was written twice"
    return {r["task_id"]: (r["success"], r["decoded_calls"]) for r in records}


@pytest.fixture(scope="module")
def answers():
    return ground_truth_answers(TASKS)


@pytest.fixture(scope="module")
def reference_run(answers, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("reference")
    with ScriptedServer(replay_model(answers)) as server:
        amd_run(server.url, tmp / "run.jsonl", tmp / "cache", "--concurrency", "4")
        assert len(server.chat_requests()) > 0
    result = verdicts(tmp / "run.jsonl")
    assert sorted(result) == sorted(TASKS)
    assert sum(success for success, _ in result.values()) >= 15  # the scripted model replays ground truth
    return result


def test_faulty_server_gives_the_same_verdicts_and_calls(answers, reference_run, tmp_path):
    with ScriptedServer(flaky(replay_model(answers), rate=0.2, seed=7)) as server:
        amd_run(server.url, tmp_path / "run.jsonl", tmp_path / "cache", "--concurrency", "4")
        sent = len(server.chat_requests())
    assert verdicts(tmp_path / "run.jsonl") == reference_run
    assert sent > len(reference_run)  # faults were really injected and retried


def test_rerun_of_a_finished_run_makes_no_model_request(answers, tmp_path):
    out, cache = tmp_path / "run.jsonl", tmp_path / "cache"
    with ScriptedServer(replay_model(answers)) as server:
        amd_run(server.url, out, cache)
        first = len(server.chat_requests())
        out.unlink()  # even with the output gone, the response cache answers everything
        amd_run(server.url, out, cache)
        assert first > 0 and len(server.chat_requests()) == first
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert all(r["model_requests"] == 0 for r in records) and len(records) == len(TASKS)


def test_sigkill_then_rerun_completes_without_duplicates(answers, reference_run, tmp_path):
    out, cache = tmp_path / "run.jsonl", tmp_path / "cache"
    with ScriptedServer(replay_model(answers), latency_s=0.05) as server:
        process = amd_run(server.url, out, cache, "--concurrency", "2", background=True)
        deadline = time.monotonic() + 120
        kill_after = random.Random().randint(2, 12)  # a random point, after some tasks were written
        while time.monotonic() < deadline and process.poll() is None:
            if out.exists() and len(out.read_text().splitlines()) >= kill_after:
                break
            time.sleep(0.02)
        process.send_signal(signal.SIGKILL)
        process.wait()
        written = len(out.read_text().splitlines())
        assert 0 < written < len(TASKS), "the kill did not land mid-run"
        amd_run(server.url, out, cache, "--concurrency", "2")
    assert verdicts(out) == reference_run


def stand_in_server(port: int, latency_s: float) -> subprocess.Popen:
    """A model server in a process of its own (tests/stand_in_vllm.py, replaying TASKS), to be killed."""
    env = {**os.environ, "STAND_IN_VLLM_BFCL_TASKS": ",".join(TASKS), "STAND_IN_VLLM_LATENCY_S": str(latency_s)}
    server = subprocess.Popen([sys.executable, str(Path(__file__).parent / "stand_in_vllm.py"), "serve", "scripted",
                               "--port", str(port)], env=env)
    assert wait_for_models(f"http://127.0.0.1:{port}/v1", 60, alive=lambda: server.poll() is None)
    return server


def test_a_server_killed_mid_run_stops_the_run_and_a_rerun_finishes_it(reference_run, tmp_path):
    """A dead server is never a verdict: the run exits non-zero with one line naming the server, its file holds
    only tasks the model really answered, and a rerun against a live server finishes exactly the rest."""
    out, cache, port = tmp_path / "run.jsonl", tmp_path / "cache", free_port()
    url = f"http://127.0.0.1:{port}/v1"
    server = stand_in_server(port, latency_s=0.05)
    try:
        process = amd_run(url, out, cache, "--concurrency", "2", "--max-retries", "2", background=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and process.poll() is None:
            if out.exists() and len(out.read_text().splitlines()) >= 3:
                break
            time.sleep(0.02)
        server.kill()
        output, _ = process.communicate(timeout=120)
    finally:
        server.kill()
        server.wait()
    written = verdicts(out)
    assert process.returncode != 0 and 3 <= len(written) < len(TASKS), output[-2000:]
    assert output.strip().splitlines()[-1].startswith(f"amd: error: model scripted: cannot reach {url}")
    assert "Traceback" not in output
    assert all(json.loads(line)["status"] != "model_error" for line in out.read_text().splitlines())
    assert written == {task: reference_run[task] for task in written}
    server = stand_in_server(port, latency_s=0)
    try:
        amd_run(url, out, cache, "--concurrency", "2")
    finally:
        server.kill()
        server.wait()
    assert verdicts(out) == reference_run


def test_api_key_never_lands_on_disk(answers, tmp_path):
    sentinel = "sk-SENTINEL-" + "7" * 40
    out, cache, log = tmp_path / "run.jsonl", tmp_path / "cache", tmp_path / "run.log"
    with ScriptedServer(replay_model(answers)) as server:
        argv = [sys.executable, "-m", "amd.cli", "run", "bfcl", "--agent", "openai:scripted-model",
                "--tasks", ",".join(TASKS[:3]), "--out", str(out)]
        env = {**os.environ, "AMD_CACHE_DIR": str(cache), "OPENAI_API_KEY": sentinel,
               "OPENAI_BASE_URL": server.url}
        with open(log, "w") as handle:
            subprocess.run(argv, env=env, stdout=handle, stderr=subprocess.STDOUT, timeout=300, check=True)
        sent_headers = [{k.lower(): v for k, v in r.headers.items()}.get("authorization", "")
                        for r in server.chat_requests()]
    assert sent_headers and all(sentinel in header for header in sent_headers)  # the key was really used
    written = [path for path in tmp_path.rglob("*") if path.is_file()]
    assert out in written and any(cache in path.parents for path in written)
    for path in written:
        assert sentinel.encode() not in path.read_bytes(), f"API key found in {path}"


def test_hostile_model_output_is_refused_and_reported(tmp_path):
    marker = tmp_path / "pwned"
    hostile = [f"__import__('os').system('touch {marker}')", "open('/etc/passwd')",
               f"[cd(folder=__import__('pathlib').Path({str(marker)!r}).touch())]"]
    replies = iter(hostile)

    def respond(request):
        last = request["messages"][-1]["content"]
        return "Done." if last.startswith(OBSERVATION_PREFIX) else next(replies, "Done.")

    out = tmp_path / "run.jsonl"
    with ScriptedServer(respond) as server:
        argv = ["--tasks", TASKS[0]]
        done = subprocess.run([sys.executable, "-m", "amd.cli", "run", "bfcl", "--agent", f"vllm:m@{server.url}",
                               *argv, "--out", str(out)], env={**os.environ, "AMD_CACHE_DIR": str(tmp_path / "c")},
                              capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    record = json.loads(out.read_text())
    steps = [step for turn in record["turns"] for step in turn["steps"] if step["rejected"]]
    assert [step["model_text"] for step in steps] == hostile
    for step in steps:
        assert step["error"] and not step["calls"] and "rejected call" in step["observations"][0]
    assert record["decoded_calls"] == [[] for _ in record["decoded_calls"]]
    assert not marker.exists() and not record["success"]
