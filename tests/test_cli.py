"""The `amd` command line: real BFCL oracle runs, scoring, and one clear line for every kind of bad input."""

import json
import os
import subprocess
import sys

import pytest
from scripted_server import Cut, ScriptedServer, script

from amd.cli import main


def run_amd(*argv, cwd=None):
    """Run the CLI in a fresh process, as a user would, and return (exit code, stdout, stderr)."""
    done = subprocess.run([sys.executable, "-m", "amd.cli", *argv], capture_output=True, text=True, timeout=300, check=False,
                          cwd=cwd)
    return done.returncode, done.stdout, done.stderr


def assert_one_line_error(code, stderr, *fragments):
    assert code == 2
    lines = [line for line in stderr.splitlines() if line.startswith("amd: error:")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    for fragment in fragments:
        assert fragment in lines[0]


def test_oracle_run_and_score_on_real_bfcl_tasks(tmp_path, capsys):
    out = tmp_path / "oracle.jsonl"
    tasks = "multi_turn_base_0,multi_turn_base_104,multi_turn_base_199"
    assert main(["run", "bfcl", "--agent", "oracle", "--tasks", tasks, "--out", str(out), "--no-progress"]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["task_id"] for r in records] == tasks.split(",")
    assert all(r["success"] and r["agent"]["kind"] == "oracle" for r in records)
    assert {step["finish_reason"] for r in records for turn in r["turns"] for step in turn["steps"]} == {None}
    assert main(["score", str(out), "--recheck", "--json", str(tmp_path / "s.json")]) == 0
    printed = capsys.readouterr().out
    assert "100.0" in printed and "agrees with every stored verdict" in printed
    assert json.loads((tmp_path / "s.json").read_text())[0]["tasks"] == 3


def test_replies_cut_by_the_token_limit_are_marked_counted_and_reported(tmp_path):
    out = tmp_path / "cut.jsonl"
    with ScriptedServer(script("Done.", Cut("I will now call"), "Done.")) as server:
        done = subprocess.run([sys.executable, "-m", "amd.cli", "run", "bfcl", "--agent", f"vllm:m@{server.url}",
                               "--tasks", "multi_turn_base_0", "--out", str(out), "--no-progress"],
                              capture_output=True, text=True, timeout=300, check=True)
    steps = [step for turn in json.loads(out.read_text())["turns"] for step in turn["steps"]]
    assert [step["finish_reason"] for step in steps][:3] == ["stop", "length", "stop"]
    assert "1 model replies cut by the token limit" in done.stderr
    assert main(["score", str(out), "--json", str(tmp_path / "s.json")]) == 0
    assert json.loads((tmp_path / "s.json").read_text())[0]["cut_replies"] == 1


def test_limit_takes_the_first_tasks(tmp_path):
    out = tmp_path / "o.jsonl"
    assert main(["run", "bfcl", "--agent", "oracle", "--limit", "2", "--out", str(out), "--no-progress"]) == 0
    assert [json.loads(line)["task_id"] for line in out.read_text().splitlines()] == \
        ["multi_turn_base_0", "multi_turn_base_1"]


@pytest.mark.parametrize("argv, fragments", [
    (["run", "bfcl_v9", "--agent", "oracle", "--out", "x.jsonl"], ["unknown benchmark 'bfcl_v9'", "bfcl"]),
    (["run", "appworld", "--agent", "oracle", "--out", "x.jsonl"], ["AppWorld needs its task data", "APPWORLD_ROOT"]),
    (["run", "bfcl", "--agent", "oracle", "--tasks", "multi_turn_base_999", "--out", "x.jsonl"],
     ["unknown task id 'multi_turn_base_999'"]),
    (["run", "bfcl", "--agent", "gpt9000", "--out", "x.jsonl", "--limit", "1"], ["gpt9000"]),
    (["run", "bfcl", "--agent", "oracle", "--out", "x.jsonl", "--memory-config", "wf"], ["needs --memory"]),
    (["run", "bfcl", "--agent", "oracle", "--out", "x.jsonl", "--memory-config", "wf", "--memory", "m",
      "--k", "wf=one"], ["--k", "'wf=one'"]),
    (["run", "bfcl", "--agent", "oracle", "--out", "x.jsonl", "--limit", "0"], ["--limit must be at least 1"]),
    (["run", "bfcl", "--agent", "oracle", "--out", "x.jsonl", "--user-model", "local:qwen2.5-coder-0.5b"],
     ["bfcl", "user_model"]),
    (["run", "toolsandbox", "--agent", "oracle", "--out", "x.jsonl", "--user-model", "openai:a",
      "--benchmark-option", "user_model=openai:b"], ["--user-model and --benchmark-option user_model"]),
    (["score", "missing.jsonl"], ["missing.jsonl: no such trajectory file"]),
    (["run", "bfcl", "--agent", "oracle", "--out", "x.jsonl", "--memory-config", "wf_everything", "--memory", "m"],
     ["wf_everything"]),
    (["run", "bfcl", "--agent", "vllm:m@http://127.0.0.1:9/v1", "--out", "x.jsonl", "--limit", "1",
      "--max-retries", "1"], ["cannot reach http://127.0.0.1:9/v1 after 2 tries"]),
])
def test_bad_input_is_one_clear_line(tmp_path, argv, fragments):
    code, _, stderr = run_amd(*argv, cwd=tmp_path)
    assert_one_line_error(code, stderr, *fragments)


def test_corrupt_trajectory_file_names_the_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"schema": "amd.trajectory/1"}\n')
    code, _, stderr = run_amd("score", str(bad))
    assert_one_line_error(code, stderr, "bad.jsonl:1", "invalid trajectory")


def test_output_cut_by_the_reader_ends_quietly(tmp_path):
    """`amd memory show BANK | head`: the reader closing the pipe is not an error (no traceback, exit 0)."""
    env = {**os.environ, "AMD_CACHE_DIR": str(tmp_path / "cache")}
    for argv in (["run", "bfcl", "--agent", "oracle", "--out", "o.jsonl", "--no-progress"],
                 ["memory", "build", "--trajectories", "o.jsonl", "--writer", "rules", "--embedder", "hash:64",
                  "--out", "bank"]):
        subprocess.run([sys.executable, "-m", "amd.cli", *argv], cwd=tmp_path, env=env, check=True,
                       capture_output=True)
    show = subprocess.Popen([sys.executable, "-m", "amd.cli", "memory", "show", "bank", "--n", "1000"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert show.stdout.readline()
    show.stdout.close()  # far more than a pipe's buffer is still to come
    assert show.wait(timeout=120) == 0
    assert "Traceback" not in show.stderr.read().decode()
