"""Smoke test against the real embedded model: a BFCL task through `amd run`, offline, on the CPU.

Slow (a cold 3.4k-token prefill on 2 cores is about a minute), so it is marked slow. The model is tiny and rarely
solves a task; the test checks that its real text and the official checker's verdict land in the trajectory, and
that a rerun after deleting the output makes no model request.
"""

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

TASK = "multi_turn_base_104"  # TradingBot only: the smallest tool-doc prompt (notes/local-llm.md)


def run_local(out, cache):
    argv = [sys.executable, "-m", "amd.cli", "run", "bfcl", "--agent", "local:qwen2.5-coder-0.5b", "--tasks", TASK,
            "--max-steps", "6", "--max-tokens", "128", "--out", str(out), "--no-progress"]
    env = {**os.environ, "AMD_CACHE_DIR": str(cache)}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1500, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


def test_local_model_runs_a_bfcl_task_offline(tmp_path):
    out, cache = tmp_path / "s.jsonl", tmp_path / "cache"
    record = run_local(out, cache)
    steps = [step for turn in record["turns"] for step in turn["steps"]]
    assert record["agent"]["spec"] == "local:qwen2.5-coder-0.5b" and record["agent"]["kind"] == "model"
    assert steps and all(step["model_text"] for step in steps)  # the model's real text
    assert record["tokens"]["prompt"] > 1000 and record["model_requests"] >= len(steps)
    assert "valid" in record["checker"]  # the official checker's verdict is stored
    assert record["success"] == (record["checker"]["valid"] and record["status"] == "finished")
    out.unlink()
    again = run_local(out, cache)
    again_steps = [step for turn in again["turns"] for step in turn["steps"]]
    assert again["model_requests"] == 0 and all(step["cached"] for step in again_steps)
    assert [s["model_text"] for s in again_steps] == [s["model_text"] for s in steps]
    assert again["decoded_calls"] == record["decoded_calls"] and again["success"] == record["success"]


def test_a_request_with_another_prefix_does_not_evict_the_tool_docs(monkeypatch, tmp_path):
    """The student's subtask decomposition between two agent steps: the second step still finds the tool docs in
    the server's prefix cache (llama.cpp's host-memory prompt cache, amd.llm.local.PROMPT_CACHE_MIB)."""
    from amd.benchmarks.agentdojo import AgentDojo
    from amd.llm import open_model
    from amd.methods.amd.decompose import decompose_instruction

    monkeypatch.setenv("AMD_CACHE_DIR", str(tmp_path))
    docs = json.dumps([tool["function"] for tool in AgentDojo(suite="banking").start("banking/user_task_0").tools])
    system = {"role": "system", "content": f"Call these functions:\n{docs}"}
    with open_model("local:qwen2.5-coder-0.5b", {"max_tokens": 8, "cache": False}) as model:
        first = model.chat([system, {"role": "user", "content": "What is my balance?"}])
        decompose_instruction(model.chat, "Pay the bill in bill-december-2023.txt.")
        second = model.chat([system, {"role": "user", "content": "What is my IBAN?"}])
    assert first.cached_prompt_tokens < 50 and first.prompt_tokens > 1000
    assert second.cached_prompt_tokens >= first.prompt_tokens - 20


def test_the_embedded_server_decodes_json_steps_under_the_tool_schemas(tmp_path):
    """--prompting json on llama.cpp: every reply is one JSON object that the step schema admits (a call of the
    task's tools with their own parameters, or the answer), and no reply runs to the token limit."""
    from jsonschema import Draft202012Validator

    from amd.agent.json_steps import step_format
    from amd.benchmarks.agentdojo import AgentDojo

    out, task = tmp_path / "j.jsonl", "slack/user_task_2"
    argv = [sys.executable, "-m", "amd.cli", "run", "agentdojo", "--agent", "local:qwen2.5-coder-0.5b", "--tasks",
            task, "--prompting", "json", "--max-steps", "3", "--max-tokens", "192", "--out", str(out), "--no-progress"]
    done = subprocess.run(argv, env={**os.environ, "AMD_CACHE_DIR": str(tmp_path / "cache")}, capture_output=True,
                          text=True, timeout=1500, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads(out.read_text())
    steps = [step for turn in record["turns"] for step in turn["steps"]]
    episode = AgentDojo(suite="slack").start(task)
    episode.next_user_message(None)
    schema = Draft202012Validator(step_format(episode.tools)["json_schema"]["schema"])
    assert steps and all(step["finish_reason"] == "stop" for step in steps)
    for step in steps:
        if step["calls"] or step["rejected"]:
            assert schema.is_valid(json.loads(step["model_text"])), step["model_text"]
