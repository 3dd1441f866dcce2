"""Outputs asked for by name: every registered table and figure is made by `all` or by a CPU-scale experiment on
demand in the default config, and builds there; an output the active config cannot make is refused before any job
runs, naming the experiments and config files that can; the docs (Getting started) and `amd plan` give each one's
measured time.

Builds run in a copy of the workflow with the stand-in `amd` (tests/slurm/fake_amd.py): instant runs, the real
analysis code making the tables and figures."""

import json
import re
import shutil

import pytest
import yaml
from test_pipeline_workflow import REPO, make_workdir, planned_jobs, snakemake

from amd.cli import main as amd_main
from amd.core.registry import OUTPUTS
from amd.workflow.config import ConfigError, active_config, merge_configs
from amd.workflow.grid import Grid
from amd.workflow.jobs import TaskPools
from amd.workflow.named import makers_of, refusal
from amd.workflow.plan import load_config

DEFAULT = active_config({}, REPO / "config")
PAPER = active_config(yaml.safe_load((REPO / "config/paper.yaml").read_text()), REPO / "config")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Every on-demand output of the default config, built in one call from an empty results/."""
    where, env = make_workdir(tmp_path_factory.mktemp("named"))
    grid = Grid(DEFAULT)
    targets = [path for name in grid.on_demand() for path in grid.output_paths(name)]
    snakemake(where, env, "--cores", "2", *targets)
    calls = [json.loads(line) for line in (where / "amd_calls.jsonl").read_text().splitlines()]
    return where, grid, calls


def test_every_registered_output_is_made_by_all_or_on_demand_in_the_default():
    grid = Grid(DEFAULT)
    in_all = {name for spec in grid.config["experiments"].values() if not spec.get("on_demand")
              for name in spec["outputs"]}
    assert set(OUTPUTS.names()) == in_all | set(grid.on_demand())
    assert not in_all & set(grid.on_demand())
    for experiments in grid.on_demand().values():
        for experiment in experiments:
            assert grid.config["experiments"][experiment]["measured"]["minutes"] > 0


def test_all_leaves_every_on_demand_experiment_out():
    grid = Grid(DEFAULT)
    targets = grid.all_targets()
    assert not any("quick" in path or "attacked" in path or "qwen15_teacher" in path for path in targets)
    for name in grid.on_demand():
        assert not set(grid.output_paths(name)) & set(targets)


def test_each_on_demand_output_builds_from_its_own_runs(built):
    where, grid, calls = built
    for name, experiments in grid.on_demand().items():
        for path in grid.output_paths(name):
            assert (where / path).stat().st_size > 0, path
        made = next(call for call in calls if isinstance(call, list) and call[:2] in (["table", name], ["figure", name]))
        runs = made[made.index("--runs") + 1:made.index("--note")]
        expected = {run for experiment in experiments for run in grid.experiment_runs(experiment)}
        assert set(runs) == expected and runs, name


def test_the_runs_take_each_agents_own_tasks_and_options(built):
    _, _, calls = built
    runs = [call for call in calls if isinstance(call, list) and call[:1] == ["run"]]
    quick = "banking/user_task_0,banking/user_task_1,slack/user_task_0,slack/user_task_2"

    def flags(agent_spec, out_part):
        call = next(call for call in runs if out_part in call[call.index("--out") + 1])
        assert call[call.index("--agent") + 1] == agent_spec
        return call

    teacher = flags("local:qwen2.5-coder-1.5b", "teacher-qwen15_teacher")
    assert teacher[teacher.index("--tasks") + 1] == quick
    attacked = flags("local:qwen2.5-coder-1.5b", "student-qwen15_attacked/zero_shot")
    assert "attack=ignore_previous" in attacked and "suite=banking,slack" in attacked
    assert attacked[attacked.index("--tasks") + 1].split(",")[0] == "banking/user_task_0/injection_task_0"
    oracle = flags("oracle", "teacher-oracle")
    assert "--tasks" not in oracle  # the oracle keeps every teacher task of the benchmark


def test_the_security_table_pairs_the_attacked_runs(built):
    where, _, _ = built
    table = (where / "results/tables/security_pairs.csv").read_text()
    assert "qwen15_attacked" in table and "wf_st_fn" in table


def test_an_output_the_config_cannot_make_is_refused_before_any_job_naming_who_can(tmp_path):
    where, env = make_workdir(tmp_path)
    result = snakemake(where, env, "--cores", "2", "results/paper/tables/security_pairs.md", "--configfile",
                       "config/paper.yaml", check=False)
    text = result.stdout + result.stderr
    assert result.returncode != 0
    assert "'security_pairs': no experiment of the active config (name 'paper')" in text
    assert "`cpu_security` in config/config.yaml (config `default`)" in text
    assert not (where / "amd_calls.jsonl").exists() and not (where / "results").exists()


def test_a_registered_output_no_config_makes_is_refused_with_what_to_add(tmp_path):
    assert makers_of("fig3_steps", REPO / "config") == [
        (str(REPO / "config/config.yaml"), "ablation", None), (str(REPO / "config/cpu_evidence.yaml"), "ablation", None),
        (str(REPO / "config/paper.yaml"), "main_paper", None), (str(REPO / "config/paper.yaml"), "main", None)]
    (tmp_path / "config").mkdir()
    assert makers_of("fig3_steps", tmp_path / "config") == []
    message = refusal("no_such_table", "default")
    assert message.endswith("add an experiment with outputs: [no_such_table]") and "experiments that make" not in message


def test_a_config_of_another_name_leaves_the_default_experiments_out():
    paper = Grid(PAPER)
    assert not [name for name in paper.config["experiments"] if name.startswith("cpu_")]
    assert paper.on_demand() == {}
    with pytest.raises(ConfigError, match="security_pairs"):
        paper.output_runs("security_pairs")
    unnamed = Grid(merge_configs(DEFAULT, {"run": {"max_steps": 3}}))  # an overlay that keeps the name
    assert "cpu_main" in unnamed.config["experiments"]


def test_an_experiment_in_all_for_an_output_replaces_the_on_demand_one():
    config = merge_configs(DEFAULT, {"experiments": {"mine": {
        "benchmarks": ["agentdojo"], "students": ["qwen15"], "memory_configs": ["zero_shot", "wf_st_fn"],
        "teachers": ["oracle", "qwen15_teacher"], "outputs": ["table3_teacher"]}}})
    grid = Grid(config)
    assert "table3_teacher" not in grid.on_demand()
    assert set(grid.output_runs("table3_teacher")) == set(grid.experiment_runs("mine"))
    assert "results/tables/table3_teacher.md" in grid.all_targets()
    assert not any("qwen15_quick" in path for path in grid.all_targets())


def test_an_agents_tasks_go_over_the_benchmarks_in_every_role():
    grid = Grid(DEFAULT)
    pools = TaskPools(grid)
    assert pools.tasks("agentdojo", "student", "qwen15")[1] == 13
    assert pools.tasks("agentdojo", "teacher", "qwen15_teacher")[1] == 4
    assert pools.tasks("agentdojo", "student", "qwen15_quick")[0] == grid.tasks("agentdojo", "teacher",
                                                                                 "qwen15_teacher")
    assert grid.options("agentdojo", "qwen15_attacked") == {"suite": "banking,slack", "attack": "ignore_previous"}
    assert grid.options("agentdojo") == {"suite": "banking,slack"}


def documented_named_targets() -> dict[str, float]:
    """The docs' table of named targets (docs/getting-started.md): output -> measured minutes."""
    section = (REPO / "docs/getting-started.md").read_text().split("## Named targets", 1)[1].split("\n#", 1)[0]
    rows = re.findall(r"^\| `([a-z0-9_]+)` \| `[a-z_]+` \| [^|]+ \| ([0-9.]+) \|", section, flags=re.MULTILINE)
    return {name: float(minutes) for name, minutes in rows}


def test_the_docs_list_each_named_output_with_its_measured_time():
    grid = Grid(DEFAULT)
    measured = {name: grid.config["experiments"][experiments[0]]["measured"]["minutes"]
                for name, experiments in grid.on_demand().items()}
    assert documented_named_targets() == measured


def test_amd_plan_prints_each_experiments_measured_time(capsys, tmp_path):
    shutil.copytree(REPO / "config", tmp_path / "config")  # a fresh checkout's config, none of its results
    assert amd_main(["plan"]) == 0
    printed = capsys.readouterr().out
    table = printed.split("Experiments (built by", 1)[1]
    for name, spec in load_config([])["experiments"].items():
        row = next(line for line in table.splitlines() if line.startswith(f"| {name} "))
        assert ("| name " in row) == bool(spec.get("on_demand"))
        if "measured" in spec:
            assert f" {spec['measured']['minutes']:.1f} |" in row


def test_a_dry_run_of_a_named_figure_plans_its_runs(tmp_path):
    where, env = make_workdir(tmp_path)
    jobs = planned_jobs(snakemake(where, env, "-n", "--cores", "2", "results/fig5_k_sweep.pdf"))
    # base k and k = 2 for each of wf, st, fn: four memory runs of the quick student, from the oracle's bank
    assert jobs == {"run_teacher": 1, "build_memory": 1, "run_student_memory": 4, "make_figure": 1, "total": 7}
