"""The teacher–student fit probe: the fixed draw of the probe set, `amd probe` runs with three teachers' memory on real
BFCL tasks (the student is a scripted model server), the probe_fit table's ranks and rank correlations against the
full runs, and the probe experiment in the workflow config."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from replay_model import OBSERVATION_PREFIX, ground_truth_answers
from scipy.stats import kendalltau, spearmanr
from scripted_server import ScriptedServer

from amd.agent.runner import probe_tasks
from amd.analysis import layout
from amd.benchmarks.base import create_benchmark
from amd.workflow.config import ConfigError, active_config
from amd.workflow.grid import Grid

REPO = Path(__file__).resolve().parents[1]
POOL = [f"multi_turn_base_{i}" for i in range(0, 200, 5)]  # the grid's student tasks: 40
PROBE_SIZE, PROBE_SEED = 8, 1
# Three teachers, as fixtures: the oracle's trajectories with every task, every 4th or every 20th counted a
# success; AMD distils successes only, so their banks cover 200, 50 and 10 tasks.
TEACHERS = {"broad": 1, "narrow": 4, "poor": 20}
STRATEGY = "## Strategy from a similar solved task"  # prompts/memory_block_workflow.md
CELL = {"benchmark": "bfcl", "student": "scripted", "writer": "rules", "embedder": "hash", "build": "-amd",
        "memcfg": "wf", "variant": "", "protocol": "self_excluded", "k": "wf1", "seed": 0}


def amd(*argv, env, check=True):
    done = subprocess.run([sys.executable, "-m", "amd.cli", *argv], env=env, capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0 or not check, done.stderr[-3000:]
    return done


def read(path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


# ---- the draw -----------------------------------------------------------------------------------------------------

def test_the_probe_set_is_a_fixed_draw_kept_in_benchmark_order():
    chosen = probe_tasks(POOL, 8, 0)
    assert len(chosen) == 8 and chosen == [task for task in POOL if task in chosen]
    assert probe_tasks(list(reversed(POOL)), 8, 0) == list(reversed(chosen))  # the pool's order does not matter
    assert set(chosen) < set(probe_tasks(POOL, 12, 0))  # a larger probe keeps the smaller one
    assert set(chosen) <= set(probe_tasks(POOL + ["multi_turn_base_1"], 9, 0))
    assert probe_tasks(POOL, 8, 1) != chosen  # the seed chooses
    with pytest.raises(Exception, match="more than the 40 tasks"):
        probe_tasks(POOL, 41, 0)


# ---- probe runs with three teachers' memory, and the table ------------------------------------------------------

def scripted_student(task_ids):
    """Solves a task (replays its ground truth) only when the workflow memory in its system prompt names the task's
    first function; else it answers without a call, and fails."""
    benchmark, first_function = create_benchmark("bfcl"), {}
    for task_id in task_ids:
        episode = benchmark.start(task_id)
        first_function[episode.instruction] = episode.reference_turns()[0][0].name
    answers = ground_truth_answers(task_ids)

    def respond(request):
        messages = request["messages"]
        first_user = next(m["content"] for m in messages if m["role"] == "user")
        if messages[-1]["content"].startswith(OBSERVATION_PREFIX):
            return "Done."
        memory = messages[0]["content"].partition(STRATEGY)[2]
        if not re.search(rf"\.{first_function[first_user]}\b", memory):
            return "Nothing to do."
        return answers[(first_user, messages[-1]["content"])]

    return respond


@pytest.fixture(scope="module")
def fit_runs(tmp_path_factory):
    """Teacher runs and banks of the three teachers; for each, the student's probe run and its full run."""
    root = tmp_path_factory.mktemp("probe")
    env = {**os.environ, "AMD_CACHE_DIR": str(root / "cache")}
    amd("run", "bfcl", "--agent", "oracle", "--out", str(root / "oracle.jsonl"), "--concurrency", "2",
        "--no-progress", env=env)
    oracle = read(root / "oracle.jsonl")
    paths = {"teacher": {}, "probe": {}, "full": {}}
    with ScriptedServer(scripted_student(POOL)) as server:
        for teacher, every in TEACHERS.items():
            cell = CELL | {"teacher": teacher}
            teacher_run = root / layout.TEACHER_RUN.format(**cell)  # paths in the results layout
            teacher_run.parent.mkdir(parents=True)
            teacher_run.write_text("".join(json.dumps(r | {"success": int(r["task_id"].rsplit("_", 1)[1]) % every == 0})
                                           + "\n" for r in oracle))
            bank = str(root / layout.BANK_DIR.format(**cell, method="amd"))
            amd("memory", "build", "--trajectories", str(teacher_run), "--writer", "rules", "--embedder", "hash:256",
                "--out", bank, env=env)
            memory = ["--memory", bank, "--memory-config", "wf", "--protocol", "self_excluded", "--k", "wf=1",
                      "--delta", "wf=-1", "--seed", "0", "--no-progress"]
            probe_run, full_run = (str(root / template.format(**cell)) for template in (layout.PROBE_RUN,
                                                                                          layout.MEMORY_RUN))
            amd("probe", "bfcl", "--agent", f"vllm:scripted@{server.url}", "--out", probe_run, "--tasks",
                ",".join(POOL), "--probe-size", str(PROBE_SIZE), "--probe-seed", str(PROBE_SEED), *memory, env=env)
            amd("run", "bfcl", "--agent", f"vllm:scripted@{server.url}", "--out", full_run, "--tasks", ",".join(POOL),
                *memory, env=env)
            paths["teacher"][teacher], paths["probe"][teacher], paths["full"][teacher] = teacher_run, probe_run, \
                full_run
    amd("table", "probe_fit", "--runs", *map(str, [p for kind in paths.values() for p in kind.values()]),
        "--out", str(root / "probe_fit.csv"), str(root / "probe_fit.md"), env=env)
    return root, paths, env


def test_a_probe_run_is_a_memory_run_on_the_probe_set_only_and_never_sees_its_own_memory(fit_runs):
    _, paths, _ = fit_runs
    expected = probe_tasks(POOL, PROBE_SIZE, PROBE_SEED)
    for teacher, path in paths["probe"].items():
        records = read(path)
        assert [r["task_id"] for r in records] == expected, teacher
        assert all(r["memory"]["config"] == "wf" and r["memory"]["protocol"] == "self_excluded" for r in records)
        benchmark = create_benchmark("bfcl")
        assert all(r["system_memory"] for r in records)
        assert all(benchmark.task_group(entry["source_task_id"]) != r["task_group"] for r in records
                   for entry in r["system_memory"])
        # the grid's run of the same cell and seed gets the probe's replies from the response cache
        full = {r["task_id"]: r for r in read(paths["full"][teacher])}
        assert all(step["cached"] for task in expected for turn in full[task]["turns"] for step in turn["steps"])
        assert not all(step["cached"] for r in full.values() for turn in r["turns"] for step in turn["steps"])


def test_probe_fit_ranks_the_teachers_and_reports_the_rank_correlation_with_the_full_runs(fit_runs):
    root, paths, _ = fit_runs
    table = pd.read_csv(root / "probe_fit.csv")
    probe_set = set(probe_tasks(POOL, PROBE_SIZE, PROBE_SEED))
    assert list(table["teacher"]) == sorted(TEACHERS, key=lambda t: table.set_index("teacher")["probe_rank"][t])
    expected = {}
    for teacher in TEACHERS:
        probe = read(paths["probe"][teacher])
        held_out = [r["success"] for r in read(paths["full"][teacher]) if r["task_id"] not in probe_set]
        expected[teacher] = (100 * sum(r["success"] for r in probe) / len(probe), 100 * sum(held_out) / len(held_out))
    rows = table.set_index("teacher")
    for teacher, (probe_score, grid_score) in expected.items():
        assert rows.loc[teacher, "probe_success"] == pytest.approx(probe_score, abs=0.01)
        assert rows.loc[teacher, "grid_success"] == pytest.approx(grid_score, abs=0.01)
        assert rows.loc[teacher, "probe_tasks"] == PROBE_SIZE and rows.loc[teacher, "grid_tasks"] == 40 - PROBE_SIZE
        assert rows.loc[teacher, "teacher_success"] == pytest.approx(100 / TEACHERS[teacher], abs=0.01)
    probe_scores, grid_scores = zip(*(expected[t] for t in TEACHERS))
    # a bank that covers more tasks helps this student more, in the full runs and on the probe
    assert grid_scores[0] > grid_scores[1] > grid_scores[2] and rows.loc["poor", "probe_rank"] == 3
    assert rows["grid_rank"].tolist() == [1, 2, 3]
    assert (rows["teachers_compared"] == 3).all()
    assert rows["spearman_rho"].iloc[0] == pytest.approx(spearmanr(probe_scores, grid_scores)[0], abs=0.01)
    assert rows["kendall_tau"].iloc[0] == pytest.approx(kendalltau(probe_scores, grid_scores)[0], abs=0.01)
    assert rows["teacher_success_rho"].iloc[0] == pytest.approx(1.0)
    markdown = (root / "probe_fit.md").read_text()
    assert "Teacher–student fit probe" in markdown and "outside the probe set" in markdown


def test_amd_probe_needs_a_probe_size_or_a_fixed_task_list(fit_runs):
    root, _, env = fit_runs
    done = amd("probe", "bfcl", "--agent", "oracle", "--out", str(root / "x.jsonl"), env=env, check=False)
    assert done.returncode == 2 and "needs --probe-size N" in done.stderr
    done = amd("probe", "bfcl", "--agent", "oracle", "--out", str(root / "x.jsonl"), "--probe-size", "0", env=env,
               check=False)
    assert done.returncode == 2 and "--probe-size must be at least 1" in done.stderr


# ---- the workflow ---------------------------------------------------------------------------------------------------

def small_config(**probe_experiment) -> dict:
    config = active_config({}, REPO / "config")
    config["students"]["qwen05"] = {"spec": "local:qwen2.5-coder-0.5b"}
    config["writers"]["rules"] = {"spec": "rules"}
    config["benchmarks"]["bfcl"]["student_tasks"] = POOL
    config["probe"] = {"size": 6, "seed": 0}
    config["experiments"] = {
        "grid": {"benchmarks": ["bfcl"], "students": ["qwen05"], "memory_configs": ["wf"], "seeds": [0, 1],
                 "outputs": ["table2_ablation"]},
        "fit": {"benchmarks": ["bfcl"], "students": ["qwen05"], "memory_configs": ["wf"], "seeds": [0],
                "probe": True, "outputs": ["probe_fit"]} | probe_experiment}
    return config


def test_probe_fit_takes_the_grids_runs_of_its_cells_where_they_have_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    grid = Grid(small_config())
    probe_runs = grid.output_runs("probe_fit")
    assert [run for run in probe_runs if "/probe-" in run] == [
        "results/bfcl/probe-qwen05/oracle-rules-minilm-amd/wf/self_excluded/k_wf1/seed0/trajectories.jsonl"]
    assert not [run for run in probe_runs if "/student-" in run]  # nothing of the grid has run yet
    finished = Path("results/bfcl/student-qwen05/oracle-rules-minilm-amd/wf/self_excluded/k_wf1/seed1/"
                    "trajectories.jsonl")
    finished.parent.mkdir(parents=True)
    finished.write_text("")
    assert [run for run in grid.output_runs("probe_fit") if "/student-" in run] == [str(finished)]
    assert grid.probe_args({"benchmark": "bfcl", "student": "qwen05"}).endswith("--probe-size 6 --probe-seed 0")
    assert grid.probe_args({"benchmark": "bfcl", "student": "qwen05"}).startswith(f"--tasks {','.join(POOL)}")


def test_a_probe_experiment_is_checked_before_any_job():
    config = small_config(memory_configs=["zero_shot", "wf"])
    with pytest.raises(ConfigError, match="experiments.fit.memory_configs: a probe compares teachers' memory"):
        Grid(config)
    config = small_config()
    del config["probe"]
    with pytest.raises(ConfigError, match="experiments.fit.probe: no `probe` section"):
        Grid(config)
    config = small_config()
    config["probe"]["tasks"] = {"bfcl": ["multi_turn_base_1"]}
    with pytest.raises(ConfigError, match="probe.tasks.bfcl: the probe set must be part of the benchmark's "
                                          "student_tasks \\(multi_turn_base_1\\)"):
        Grid(config)
    config["probe"]["tasks"] = {"bfcl": POOL[:3]}
    assert Grid(config).probe_args({"benchmark": "bfcl", "student": "qwen05"}) == f"--tasks {','.join(POOL[:3])}"


def test_the_paper_grid_probes_table_3s_cells_on_twelve_tasks_with_one_seed():
    from amd.cli import build_parser

    config = active_config(yaml.safe_load((REPO / "config/paper.yaml").read_text()), REPO / "config")
    grid = Grid(config)
    probes = [run for run in grid.output_runs("probe_fit") if "/probe-" in run]
    assert len(probes) == 2 * 4 and all(run.endswith("/seed0/trajectories.jsonl") for run in probes)
    table3 = {run.replace("/student-", "/probe-") for run in grid.output_runs("table3_teacher") if "seed0" in run}
    assert set(probes) <= table3  # the same cells as Table 3, on the probe set
    parsed = build_parser().parse_args(["probe", "appworld", "--agent", "x:y", "--out", "o",
                                        *grid.probe_args({"benchmark": "appworld", "student": "qwen3_4b"}).split()])
    assert (parsed.probe_size, parsed.probe_seed) == (12, 0)
    assert parsed.benchmark_option == ["dataset=test_normal", "harness=paper"]  # the benchmark's options, its harness too
