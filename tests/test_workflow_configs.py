"""Configs of one's own: what each config inherits (config/base.yaml; the embedded default only for a config without a
name of its own), a null removing an inherited key, outputs kept apart per config, agents at servers one already
runs (each with its own endpoint and key variable), every model spec checked while planning, and jobs that find
`amd` however Snakemake was started. Planning only, but for one real `amd score` job."""

import json
import os
import shutil
import subprocess

import pytest
import yaml
from test_cost import record, write
from test_pipeline_workflow import (
    REPO,
    SNAKEMAKE,
    WORKFLOW_FILES,
    make_workdir,
    overlay,
    planned_jobs,
    snakemake,
)

from amd.analysis import layout
from amd.workflow.config import ConfigError, active_config, merge_configs
from amd.workflow.grid import Grid

PAPER = yaml.safe_load((REPO / "config/paper.yaml").read_text())
TWELVE = [f"multi_turn_base_{i}" for i in range(12)]
SERVER = "vllm:Qwen/Qwen3-4B@http://gpu-node:8000/v1"
MINE = {"name": "mine", "benchmarks": {"bfcl": {}},
        "students": {"small": {"spec": "vllm:my-model@http://gpu-node:8000/v1"}},
        "experiments": {"mine": {"benchmarks": ["bfcl"], "students": ["small"],
                                 "memory_configs": ["zero_shot", "wf_st_fn"], "outputs": ["table2_ablation"]}}}


def grid_of(*overlays: dict) -> Grid:
    """The grid the workflow plans with these --configfile contents, in order (none: the embedded default)."""
    merged = {}
    for one in overlays:
        merged = merge_configs(merged, one)
    return Grid(active_config(merged, REPO / "config"))


def refusal(*overlays: dict) -> str:
    with pytest.raises(ConfigError) as error:
        grid_of(*overlays)
    assert "\n" not in str(error.value)
    return str(error.value)


# ---- what a config inherits ------------------------------------------------------------------------------------

def test_a_config_with_its_own_name_gets_neutral_defaults_and_nothing_of_the_demo():
    grid = grid_of(MINE)
    assert list(grid.config["experiments"]) == ["mine"] and list(grid.config["benchmarks"]) == ["bfcl"]
    assert set(grid.agents()) == {"oracle", "small"} and "probe" not in grid.config and grid.note() == "''"
    run = grid.run_args("small", "bfcl")  # amd run's own limits: the paper's step caps, no JSON prompting
    assert run == "--concurrency 1 --max-steps 40 --max-steps-per-turn 20 --max-tokens 512 --temperature 0.0"
    assert grid.benchmark_args("bfcl", "student", "small") == ""  # every task, not the demo's three
    assert set(grid.output_paths("table2_ablation")) == {"results/mine/tables/table2_ablation.csv",
                                                         "results/mine/tables/table2_ablation.md"}


def test_a_config_without_a_name_tweaks_the_embedded_default():
    grid = grid_of({"run": {"max_steps": 3}})
    assert {"ablation", "online", "cpu_main"} <= set(grid.config["experiments"]) and grid.name == "default"
    assert "--max-steps 3 " in grid.run_args("qwen15", "agentdojo") and "--prompting json" in grid.run_args(
        "qwen15", "agentdojo")
    assert grid.output_paths("table2_ablation") == ["results/tables/table2_ablation.csv",
                                                    "results/tables/table2_ablation.md"]
    assert grid.output_paths("fig3_steps") == ["results/fig3_steps.pdf"]


def test_the_paper_grid_inherits_nothing_of_the_demo_and_writes_its_outputs_apart():
    paper, default = grid_of(PAPER), grid_of()
    assert "agentdojo" not in paper.config["benchmarks"] and not {"qwen15", "qwen15_teacher"} & set(paper.agents())
    assert paper.output_paths("fig5_k_sweep") == ["results/paper/fig5_k_sweep.pdf"]
    for name in set(paper.on_demand()) | {"table1_main", "fig3_steps", "table2_ablation"}:
        assert not set(paper.output_paths(name)) & set(default.output_paths(name))
    assert paper.own_path(layout.ESTIMATE) == "results/paper/plan/estimate.{ext}"


def grid_paths(grid: Grid) -> set[str]:
    """Every path a grid's jobs write: runs and banks, and the servers' logs."""
    from amd.workflow.jobs import TaskPools, grid_jobs

    return {job.path for job in grid_jobs(grid, TaskPools(grid))} | {batch.log for batch in grid.batches()}


def test_two_configs_with_the_same_agent_names_never_write_one_run_file():
    """The issue's case: `mine` runs the oracle on every BFCL task, `gpu_a` on 12; each writes its own tree, the
    embedded default's stays where the README says, and each tree reads back as the same cells."""
    mine = grid_of(MINE | {"benchmarks": {"bfcl": {"teacher_tasks": None}}})
    gpu_a = grid_of(MINE | {"name": "gpu_a", "benchmarks": {"bfcl": {"teacher_tasks": TWELVE}}})
    paper, default = grid_of(PAPER), grid_of()
    trees = [grid_paths(grid) for grid in (mine, gpu_a, paper, default)]
    assert all(trees) and all(not a & b for i, a in enumerate(trees) for b in trees[i + 1:])
    assert "results/mine/bfcl/teacher-oracle/trajectories.jsonl" in trees[0]
    assert "results/gpu_a/bfcl/teacher-oracle/trajectories.jsonl" in trees[1]
    assert "results/agentdojo/teacher-oracle/trajectories.jsonl" in trees[3]
    for path in trees[0]:
        if path.endswith(layout.RUN_FILE):
            assert layout.describe_run(path) == layout.describe_run(path.replace("results/mine/", "results/", 1))
            assert layout.describe_run(path)["role"] != "other"


def test_plan_says_done_only_for_a_run_file_that_is_what_the_config_asks(tmp_path, monkeypatch):
    from amd.workflow.jobs import run_status

    monkeypatch.chdir(tmp_path)
    run = tmp_path / "run.jsonl"
    write(run, [record(task, "oracle", {"prompt": 0, "completion": 0}) for task in TWELVE])
    (tmp_path / "run.jsonl.tasks.json").write_text(json.dumps({"benchmark": "bfcl", "task_ids": TWELVE}))
    assert run_status(str(run), "oracle", TWELVE) == "done"
    assert run_status(str(run), "oracle", None) == "done"
    assert run_status(str(run), "oracle", [*TWELVE, "multi_turn_base_99"]) == "differs"  # other tasks asked
    assert run_status(str(run), "vllm:other", TWELVE) == "differs"  # another model
    write(run, [record(task, "oracle", {"prompt": 0, "completion": 0}) for task in TWELVE[:5]])
    assert run_status(str(run), "oracle", TWELVE) == "partial"


def test_a_null_removes_what_a_key_inherited_and_keeps_its_meaning_where_null_is_a_value():
    grid = grid_of({"experiments": {"online": None}, "note": None,
                    "teachers": {"qwen15_teacher": {"temperature": None}}})
    assert "online" not in grid.config["experiments"] and grid.note() == "''"
    assert grid.config["teachers"]["qwen15_teacher"]["temperature"] is None  # not sent
    assert grid.config["benchmarks"]["agentdojo"]["teacher_tasks"] is None  # every task
    assert "main" not in grid_of(PAPER, {"experiments": {"main": None}}).config["experiments"]
    # a null where the key is required is refused like a missing key
    assert refusal({"defaults": {"teacher": None}}) == "config: defaults: 'teacher' is missing (required here)"


@pytest.mark.parametrize("overlay, message", [
    ({"defaults": {"protocol": "self_exclude"}},
     ("config: defaults.protocol: 'self_exclude' is not a known protocol (did you mean 'self_excluded'?); known: "
     "self_excluded,")),
    ({"run": {"concurency": 2}},
     "config: run: 'concurency' is not a key here (did you mean 'concurrency'?); keys here: max_steps_per_turn,"),
    ({"students": {"qwen15": {"spec": "vlm:Qwen/Qwen3-4B"}}},
     ("config: students.qwen15.spec: 'vlm:Qwen/Qwen3-4B' is not an agent spec (did you mean 'vllm:'?); its forms: "
     "oracle, openai:MODEL,")),
    ({"writers": {"rules": {"spec": "rule"}}}, ("config: writers.rules.spec: 'rule' is not a writer spec (did you "
     "mean 'rules'?); its forms: rules, openai:MODEL,")),
    ({"defaults": {"k": {"wff": 2}}}, "config: defaults.k: 'wff' is not a known memory type code (did you mean 'wf'?)"),
    ({"run": {"concurrency": "two"}}, "config: run.concurrency: 'two' should be a whole number"),
    ({"run": {"temperature": 3}}, "config: run.temperature: 3 is above the largest allowed value, 2"),
    ({"teachers": {"a b": {"spec": "oracle"}}}, "config: teachers: 'a b' is not a valid name: letters, digits and _"),
])
def test_a_config_error_is_a_sentence_naming_the_key_with_a_did_you_mean(overlay, message):
    refused = refusal(overlay)
    assert refused.startswith(message), refused
    assert not any(mark in refused for mark in ("^", "(?:", "$'", "Additional properties", "is not one of ["))


def test_a_null_name_is_refused_rather_than_read_as_the_embedded_default():
    assert refusal(MINE | {"name": None}).startswith("config: name: null cannot remove the name")


@pytest.mark.parametrize("name", ["tables", "logs", "bfcl"])
def test_a_config_may_not_be_named_after_a_folder_of_results(name):
    assert refusal(MINE | {"name": name}).startswith(f"config: name: '{name}' is a folder of results/ already")


# ---- servers you already run, and every spec checked while planning ----------------------------------------------

def test_a_spec_naming_a_server_beside_an_inherited_serve_is_refused_naming_both():
    message = refusal(PAPER, {"students": {"qwen3_4b": {"spec": SERVER}}})
    assert message.startswith(f"config: students.qwen3_4b: model spec '{SERVER}' names an endpoint of its own, "
                              "and `serve` would start a server") and "`serve: null`" in message


def test_serve_null_points_the_paper_grid_at_a_server_already_running():
    spec = f"{SERVER}#key=GPU_NODE_KEY"
    grid = grid_of(PAPER, {"students": {"qwen3_4b": {"spec": spec, "serve": None}}})
    assert "serve" not in grid.agent("qwen3_4b") and not any(
        path.startswith("results/paper/bfcl/student-qwen3_4b/") for path in grid.servers.server_of)
    assert grid.agent_args("qwen3_4b") == f"--agent '{spec}'"  # the key's variable, never a key
    assert "qwen3_4b" in grid.other_agents().split("|") and "qwen3_4b" not in grid.served_agents().split("|")
    # the same model sampled (`like: qwen3_4b`) follows it to the endpoint, at its own temperature
    assert grid.agent("qwen3_4b_t07") == {"spec": spec, "temperature": 0.7}
    assert "qwen3_4b_t07" in grid.other_agents().split("|") and not any(
        "student-qwen3_4b_t07/" in path for path in grid.servers.server_of)
    assert "serve" in grid_of(PAPER).agent("qwen3_4b_t07")  # served where qwen3_4b is


def test_an_agent_like_no_agent_is_refused_in_one_line():
    message = refusal(MINE | {"students": {"twin": {"like": "nobody"}}})
    assert message == "config: students.twin.like: 'nobody' is no agent without a `like` of its own"


@pytest.mark.parametrize("change, message", [
    ({"students": {"qwen15": {"spec": "vllm:Qwen/Qwen3-4B"}}},
     ("config: students.qwen15: model spec 'vllm:Qwen/Qwen3-4B' needs the form vllm:MODEL@http://host:port/v1 (a "
      "running server), or a `serve` entry beside it")),
    ({"students": {"qwen15": {"spec": "local:qwen2.5-coder-1.6b"}}},
     ("config: students.qwen15: unknown local model 'qwen2.5-coder-1.6b' (did you mean 'qwen2.5-coder-1.5b'?); "
      "known: local:qwen2.5-coder-0.5b, local:qwen2.5-coder-1.5b")),
    ({"teachers": {"oracle": {"serve": {"gpus": 1}}}},
     "config: teachers.oracle: 'oracle' is no model, and `serve` starts `vllm serve`"),
    ({"students": {"qwen15": {"spec": "openai:gpt-5-mini", "serve": {"gpus": 1}}}},
     "config: students.qwen15: model spec 'openai:gpt-5-mini': `serve` starts `vllm serve`, for a vllm:MODEL spec"),
    ({"writers": {"rules": {"spec": "openai:gpt-5-mini#key=sk-live-1234"}}},
     "config: writers.rules: model spec 'openai:gpt-5-mini#key=sk-live-1234': after '#' only key=VAR"),
    ({"benchmarks": {"toolsandbox": {"options": {"user_model": "gpt-5-mini"}}}},
     "config: benchmarks.toolsandbox.options.user_model: unknown model spec 'gpt-5-mini'"),
    ({"students": {"qwen15": {"benchmarks": {"toolsandbox": {"options": {"user_model": "vllm:sim"}}}}}},
     "config: students.qwen15.benchmarks.toolsandbox.options.user_model: model spec 'vllm:sim' needs the form"),
])
def test_every_model_spec_is_checked_while_planning(change, message):
    assert refusal(change).startswith(message)


def test_a_user_simulator_and_a_teacher_each_name_their_own_endpoint():
    user = "openai:gpt-5-mini@https://sim.example/v1#key=SIM_KEY"
    grid = grid_of(PAPER, {"benchmarks": {"toolsandbox": {"options": {"user_model": user}}},
                           "teachers": {"deepseek_v4_pro": {"spec": "openai:deepseek-v4-pro@https://ds.example/v1"
                                                                    "#key=DEEPSEEK_API_KEY"}}})
    assert f"--benchmark-option 'user_model={user}'" in grid.benchmark_args("toolsandbox", "student", "qwen3_4b")
    assert grid.agent_args("deepseek_v4_pro").endswith("#key=DEEPSEEK_API_KEY'")


def test_the_workflow_refuses_a_bad_overlay_in_one_line_and_plans_one_that_uses_a_running_server(tmp_path):
    where, env = make_workdir(tmp_path)
    refused = snakemake(where, env, "-n", "all", "--configfile", "config/paper.yaml",
                        overlay(where, "server.yaml", {"students": {"qwen3_4b": {"spec": SERVER}}}), check=False)
    assert refused.returncode != 0 and "Traceback" not in refused.stderr and "File " not in refused.stderr
    assert refused.stderr.strip().splitlines()[-1].startswith(f"amd: config: students.qwen3_4b: model spec '{SERVER}'")
    running = overlay(where, "running.yaml", {"students": {"qwen3_4b": {"spec": SERVER, "serve": None}}})
    planned = snakemake(where, env, "-n", "-p", "results/paper/fig5_k_sweep.pdf", "--cores", "1", "--configfile",
                        "config/paper.yaml", running)
    runs = [line for line in planned.stdout.splitlines() if "amd run appworld" in line and "student-qwen3_4b" in line]
    assert len(runs) == (1 + 3 * 4) * 2 * 2 and all(f"--agent {SERVER} " in line for line in runs)
    assert "serve-batch" not in planned.stdout and not [rule for rule in planned_jobs(planned)
                                                         if rule.startswith("serve_batch_qwen3_4b_")]


# ---- the jobs find `amd` ------------------------------------------------------------------------------------------

def test_a_job_finds_amd_when_snakemake_is_started_from_its_environment_without_activating_it(tmp_path):
    for name in WORKFLOW_FILES:
        source = REPO / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, tmp_path / name)
    run = tmp_path / "results/x/trajectories.jsonl"
    run.parent.mkdir(parents=True)
    write(run, [record("t1", "oracle", {"prompt": 0, "completion": 0})])
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(REPO),
           "AMD_CACHE_DIR": os.environ["AMD_CACHE_DIR"]}
    done = subprocess.run([str(SNAKEMAKE), "--cores", "1", "results/x/score.json"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:] + (tmp_path / "results/logs/x/score.log").read_text()
    assert (tmp_path / "results/x/score.json").exists()


def test_the_config_files_in_use_are_named_in_the_order_they_are_layered():
    from amd.workflow.config import config_files

    assert config_files({}, []) == ["config/base.yaml", "config/config.yaml"]
    assert config_files({"run": {"temperature": 0.7}}, ["t.yaml"]) == ["config/base.yaml", "config/config.yaml",
                                                                      "t.yaml"]
    assert config_files({"name": "mine"}, ["mine.yaml"]) == ["config/base.yaml", "mine.yaml"]  # starts clean
