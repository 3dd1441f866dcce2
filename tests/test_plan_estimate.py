"""`amd plan --estimate`: the cost of a config's grid before launch. Real `amd run`s of a small grid against the
scripted model server on real BFCL tasks: the estimate of a cell from its cached run, and of a cell not yet run from
the task statistics of the others, against the requests the server then received; dollars and GPU-hours from the
config's tables; the paper grid's estimate with a pilot run; the workflow target."""

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from replay_model import ground_truth_answers
from scripted_server import ScriptedServer
from test_memory_run import student_model

from amd.analysis import layout
from amd.workflow.config import merge_configs
from amd.workflow.estimate import Pricing
from amd.workflow.grid import Grid
from amd.workflow.jobs import Job
from amd.workflow.serving import Server, ServingModel, Work, node_wall_hours

REPO = Path(__file__).resolve().parents[1]
TASKS = [f"multi_turn_base_{i}" for i in (3, 21, 47, 88, 130, 161)]


class Wildcards(dict):
    __getattr__ = dict.__getitem__


def small_config(student_url: str) -> dict:
    return {
        "benchmarks": {"bfcl": {"teacher_tasks": None, "student_tasks": TASKS}},
        "run": {"max_steps_per_turn": 20, "max_steps": 40, "temperature": 0.0, "max_tokens": 256, "concurrency": 2},
        "teachers": {"oracle": {"spec": "oracle"}},
        "writers": {"rules": {"spec": "rules"}},
        "embedders": {"hash": {"spec": "hash:256", "delta": {"wf": 0.0, "st": 0.0}}},
        "representations": {"amd": {"wf": "prose", "st": "code", "fn": "code"}},
        "students": {"scripted": {"spec": f"vllm:scripted@{student_url}"}},
        "defaults": {"teacher": "oracle", "writer": "rules", "embedder": "hash", "representation": "amd",
                     "protocol": "self_excluded", "k": {"wf": 1, "st": 1, "fn": 1}, "delta": {}, "split_seed": 0,
                     "seeds": [0, 1]},
        "experiments": {"cells": {"benchmarks": ["bfcl"], "students": ["scripted"],
                                  "memory_configs": ["zero_shot", "wf_st_fn"], "outputs": ["table2_ablation"]}},
    }


def amd(command: str, env) -> None:
    done = subprocess.run([sys.executable, "-m", "amd.cli", *shlex.split(command)[1:]], env=env, capture_output=True,
                          text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def run_cell(grid: Grid, cell: dict, env) -> None:
    """The command the workflow's rule makes for this cell (rules/student.smk), run for real."""
    path, student = grid.run_path(cell), cell["student"]
    command = (f"amd run bfcl {grid.agent_args(student)} --out {path} {grid.benchmark_args('bfcl', 'student', student)} "
               f"{grid.run_args(student, cell['benchmark'])} --seed {cell['seed']} --no-progress")
    if cell["method"]:
        wildcards = Wildcards(cell, k=path.split("/k_")[1].split("/")[0], seed=str(cell["seed"]))
        command += f" --memory {grid.bank_path(wildcards)} {grid.memory_args(wildcards)}"
    amd(command, env)


def plan(config_path, env, *extra) -> pd.DataFrame:
    amd(f"amd plan --estimate --configfile {config_path} --out estimate.csv estimate.md {' '.join(extra)}", env)
    return pd.read_csv("estimate.csv").set_index("job")


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a workflow folder without config/config.yaml: the test's config alone
    return tmp_path, {**os.environ, "AMD_CACHE_DIR": str(tmp_path / "cache")}


def test_the_estimate_matches_the_requests_of_real_runs_within_ten_percent(workdir):
    where, env = workdir
    with ScriptedServer(student_model(ground_truth_answers(TASKS))) as server:
        config = small_config(server.url)
        (where / "grid.yaml").write_text(yaml.safe_dump(config))
        grid = Grid(config)
        cells = list(grid.cells("cells"))
        with_memory = next(cell for cell in cells if cell["method"])
        teacher, bank = layout.TEACHER_RUN.format(**with_memory), grid.bank_path(with_memory)
        amd(f"amd run bfcl --agent oracle --out {teacher} --no-progress", env)
        amd(f"amd memory build --trajectories {teacher} --method amd --writer rules --embedder hash:256 --out {bank}",
            env)
        received = {}
        for cell in [cell for cell in cells if cell["seed"] == 0]:
            before = len(server.chat_requests())
            run_cell(grid, cell, env)
            received[grid.run_path(cell)] = len(server.chat_requests()) - before

        before_launch = plan("grid.yaml", env)
        for path, count in received.items():  # a cell that has run: its cached run, exactly
            row = before_launch.loc[path]
            assert (row["source"], row["tasks_done"], row["requests_to_run"]) == ("run", 6, 0)
            assert row["requests"] == count
        memory_runs = [json.loads(line) for path in received if "wf_st_fn" in path
                       for line in Path(path).read_text().splitlines()]
        assert all(record["memory_calls"]["replies"] == 1 for record in memory_runs)  # one decomposition per task

        for cell in [cell for cell in cells if cell["seed"] == 1]:  # not run yet: from the seed-0 runs' statistics
            path = grid.run_path(cell)
            row = before_launch.loc[path]
            assert (row["source"], row["tasks_done"]) == ("same model and memory", 0)
            before = len(server.chat_requests())
            run_cell(grid, cell, env)
            actual = len(server.chat_requests()) - before
            assert abs(row["requests_to_run"] - actual) <= 0.1 * actual, (path, row["requests_to_run"], actual)
            received[path] = actual

    zero_shot, memory = (before_launch.loc[grid.run_path(cell)]["requests"] for cell in cells
                         if cell["seed"] == 1)
    assert memory - zero_shot == len(TASKS)  # the memory method's decompositions are in the estimate
    assert before_launch.loc[teacher, "source"] == "no model" and before_launch.loc[teacher, "requests"] == 0
    assert before_launch.loc[bank, "source"] == "no model"
    after = plan("grid.yaml", env)
    assert (after["requests_to_run"] == 0).all()
    assert sum(after.loc[path, "requests"] for path in received) == sum(received.values())
    summary = (where / "estimate.md").read_text()
    assert "Cost estimate" in summary and "| all" in summary


GPU = {"memory_gb": 80, "hbm_tb_per_s": 2.0, "bf16_tflops": 100, "bandwidth_efficiency": 0.5,
       "compute_efficiency": 0.5, "startup_s": 60, "source": "test"}


def test_dollars_from_the_price_table_and_gpu_hours_from_the_serving_model():
    config = small_config("http://127.0.0.1:9/v1")
    config["teachers"]["hosted"] = {"spec": "openai:some-model"}
    config["students"]["served"] = {"spec": "vllm:Some/Model", "serve": {"gpus": 2}}
    config["estimate"] = {
        "prices": {"openai:some-model": {"input": 2.0, "cached_input": 0.5, "output": 8.0, "source": "test"}},
        "gpu": GPU, "models": {"vllm:Some/Model": {"params_b": 1.0, "kv_kib_per_token": 1.0, "source": "test"}}}
    pricing = Pricing(Grid(config))
    figures = {"requests": 10, "prompt": 1_000_000, "completion": 100_000, "cached_prompt": 400_000}
    hosted = Job("t", "teacher", "bfcl", "hosted", "openai:some-model")
    assert pricing.dollars(hosted.spec, figures) == pytest.approx(0.6 * 2.0 + 0.4 * 0.5 + 0.1 * 8.0)
    # which key pays does not change the price
    assert pricing.dollars("openai:some-model#key=TEAM_KEY", figures) == pricing.dollars(hosted.spec, figures)
    served = Job("s", "student", "bfcl", "served", "vllm:Some/Model")
    # one request in flight: each of the 100k written tokens streams the 2 GB of weights and its ~105k tokens of KV
    # at 0.5 x 2 TB/s x 2 GPUs; 700k uncached prompt and written tokens at 2 GFLOP each, 0.5 x 100 TFLOPS x 2
    memory_s = (100_000 * 2e9 + 100_000 * 105_000 * 1024) / 2e12
    compute_s = 2e9 * 700_000 / 1e14
    assert pricing.gpu_hours(served, {"gpus": 2}, figures) == pytest.approx((60 + memory_s + compute_s) * 2 / 3600)
    assert pricing.dollars(served.spec, figures) == 0.0  # a served model costs GPU time, not a price
    assert pricing.dollars("openai:unpriced", figures) is None
    assert pricing.gpu_hours(Job("s", "student", "bfcl", "scripted", "vllm:Other/Model"), {"gpus": 1}, figures) is None
    assert any('estimate.prices["openai:unpriced"]' in note for note in pricing.notes)
    assert any('estimate.models["vllm:Other/Model"].params_b' in note for note in pricing.notes)


def test_a_shared_server_decodes_more_sequences_per_step_until_its_kv_cache_is_full():
    model = ServingModel({"estimate": {"gpu": GPU, "models": {"m": {"params_b": 8.0, "kv_kib_per_token": 128}}}})
    work = {"requests": 1000, "prompt": 8e6, "cached": 7e6, "completion": 1e5}
    alone, shared, crowded = (model.busy_s("m", 1, Work(**work, in_flight=n)) for n in (8, 64, 4096))
    assert shared < alone  # the weights are streamed once per step for more sequences than 8
    assert crowded == pytest.approx(shared)  # 64 sequences of 8.1k tokens already fill the KV cache (about 53)
    assert model.busy_s("m", 2, Work(**work, in_flight=64)) < shared  # two GPUs: more bandwidth, more KV room


def test_a_node_runs_servers_a_depth_after_the_one_before_longest_first():
    servers = [Server("a", "m", 1, 0, Work()), Server("b", "m", 1, 0, Work()), Server("c", "m", 1, 0, Work()),
               Server("late", "m", 2, 1, Work())]
    hours = {"a": 3.0, "b": 2.0, "c": 1.0, "late": 4.0}  # GPU-hours: `late` holds 2 GPUs for 2 hours
    assert node_wall_hours(servers, hours, 2) == 3.0 + 2.0  # a | b then c, then late after depth 0 ends
    assert node_wall_hours(servers, hours, 8) == 3.0 + 2.0  # more GPUs: depth 0 still ends at 3


def test_the_paper_grid_is_estimated_before_anything_runs_from_a_pilot_run(workdir):
    """No run of the paper grid exists: a pilot of Qwen3-4B on BFCL (outside results/) gives the figures of every
    BFCL job; the hosted teacher's are priced; GPU-hours and AppWorld's tasks are named as the user's to fill."""
    where, env = workdir
    for name in ("base.yaml", "config.yaml", "paper.yaml"):
        (where / "config").mkdir(exist_ok=True)
        (where / "config" / name).write_text((REPO / "config" / name).read_text())
    pilot = where / "pilot.jsonl"
    pilot.write_text("".join(json.dumps(pilot_record(task, steps=9 + 2 * i)) + "\n" for i, task in
                             enumerate(["multi_turn_base_0", "multi_turn_base_1"])))
    steps, record = 10, pilot_record("mean", steps=10)  # the pilot's mean per task
    table = plan("config/paper.yaml", env, "--runs", str(pilot))
    bfcl = table[table["benchmark"] == "bfcl"]
    qwen = bfcl[(bfcl["agent"] == "qwen3_4b") & (bfcl["memory"] == "zero_shot") & (bfcl["kind"] == "student")]
    assert len(qwen) and (qwen["source"] == "same model and memory").all()
    assert (qwen["requests"] == 200 * steps).all()  # every task at the pilot's mean
    teacher = bfcl.loc["results/paper/bfcl/teacher-gpt5mini/trajectories.jsonl"]
    assert teacher["source"] == "same memory" and teacher["requests"] == 200 * steps  # a teacher acts zero-shot
    prompt, completion = 200 * record["tokens"]["prompt"], 200 * record["tokens"]["completion"]
    assert teacher["usd"] == pytest.approx((prompt * 0.25 + completion * 2.00) / 1e6)
    assert (qwen["gpu_hours"] > 0).all()  # paper.yaml's serving model: an H100, Qwen3-4B's size
    appworld = table[table["benchmark"] == "appworld"]  # no run, no pilot: the config's prior, named as such
    runs = appworld[appworld["kind"] != "bank"]
    assert (runs["source"] == "config").all() and (runs.loc[runs["kind"] == "teacher", "tasks"] == 168).all()
    assert (runs.loc[runs["kind"] == "teacher", "requests"] == 168 * 20).all()
    pooled = table[table.index.str.contains("gpt_pool")]  # a pool's bank joins its members' banks: no model calls
    assert len(pooled) and (pooled["kind"] == "student").all()
    assert {"results/paper/appworld/teacher-gpt55/trajectories.jsonl",
            "results/paper/appworld/bank/amd/gpt55-gpt55-te3small-amd",
            "results/paper/appworld/bank/amd/gpt5mini-gpt5mini-te3small-amd"} <= set(table.index)
    written = (where / "estimate.md").read_text()
    assert 'estimate.prices["openai:gpt-5.5"]' not in written
    servers = written.split("**Model servers", 1)[1]
    assert "with figures from runs (pilots included)" in servers and "one server per batch (the workflow)" in servers
    done = amd("amd plan --configfile config/paper.yaml", env)  # the jobs alone
    assert "appworld: cannot list its tasks here" in done.stderr and "| student" in done.stdout


def pilot_record(task_id: str, steps: int) -> dict:
    """A pilot run's record, as `amd run bfcl --agent vllm:Qwen/Qwen3-4B@... --limit 2` writes it (only what the
    estimate reads)."""
    return {"task_id": task_id, "benchmark": "bfcl", "memory": {"config": "zero_shot"},
            "agent": {"spec": "vllm:Qwen/Qwen3-4B@http://gpu:8000/v1", "kind": "model", "model": "Qwen/Qwen3-4B"},
            "n_steps": steps, "tokens": {"prompt": 3000 * steps, "completion": 60 * steps, "cached_prompt": 0}}


def test_the_workflow_has_a_cost_estimate_target(tmp_path):
    for name in ("Snakefile", "rules", "config", "report", "profiles", "environment.yml"):
        source = REPO / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, tmp_path / name)
    result = subprocess.run([str(Path(sys.executable).parent / "snakemake"), "-n", "-p", "results/paper/plan/estimate.md",
                             "--cores", "1", "--configfile", "config/paper.yaml"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    command = next(line for line in result.stdout.splitlines() if "amd plan --estimate" in line)
    config = json.loads(shlex.split(command)[shlex.split(command).index("--config-json") + 1])
    assert config["estimate"]["prices"]["openai:gpt-5-mini"]["output"] == 2.00
    assert "teacher_fit" in config["experiments"]  # the merged config, as Snakemake has it


# One decode step of a Qwen3-4B-shaped decoder on one H200, ms by (context, batch): ../shared/gpu/
# decode_h200_2026-12-04.jsonl (decode_scaling.py, 2026-12-04; PyTorch, plain attention, CUDA graphs), the issue 39
# figures.
H200_STEP_MS = {(1024, 1): 4.06, (4096, 1): 4.23, (8192, 1): 4.80, (1024, 8): 4.56, (4096, 8): 5.69, (8192, 8): 7.23,
                (1024, 64): 7.47, (4096, 64): 16.10, (8192, 64): 28.35, (1024, 128): 10.34, (4096, 128): 27.90}
STEP_FACTOR = 1.75  # the model's step time is within this factor of the measured one, either way


def test_the_h200_presets_decode_steps_are_within_a_stated_factor_of_the_measured_ones():
    config = merge_configs(yaml.safe_load((REPO / "config/paper.yaml").read_text()),
                           yaml.safe_load((REPO / "config/h200.yaml").read_text()))
    model = ServingModel(config)
    assert model.gpu["name"].startswith("H200") and not model.missing("vllm:Qwen/Qwen3-4B")
    ratios = {shape: model.decode_step_s("vllm:Qwen/Qwen3-4B", 1, shape[1], shape[0]) * 1e3 / measured
              for shape, measured in H200_STEP_MS.items()}
    assert all(1 / STEP_FACTOR <= ratio <= STEP_FACTOR for ratio in ratios.values()), ratios
    # its shape: from batch 8 to 64 the tokens per second grow less at long contexts (the KV reads), as measured
    gain = {length: 8 * ratios[length, 8] * H200_STEP_MS[length, 8] / (ratios[length, 64] * H200_STEP_MS[length, 64])
            for length in (1024, 8192)}
    assert gain[1024] > 2 * gain[8192] > 2
