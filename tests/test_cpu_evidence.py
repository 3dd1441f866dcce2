"""The CPU-scale evidence experiment (config/cpu_evidence.yaml): its task list and caps follow the rule it states
(AgentDojo's tasks of its suites less those an agent that does nothing passes; caps every ground truth fits), it is
built by name only, never by `all`, and planning its outputs plans exactly its runs, apart from the default's."""

import pytest
import yaml
from test_pipeline_workflow import REPO, make_workdir, planned_jobs, snakemake

from amd.analysis import layout
from amd.benchmarks.base import create_benchmark
from amd.workflow.config import active_config
from amd.workflow.grid import Grid

CONFIG = REPO / "config" / "cpu_evidence.yaml"
EVIDENCE = active_config(yaml.safe_load(CONFIG.read_text()), REPO / "config")
OUTPUTS = ["table2_ablation", "paired_tasks", "fig3_steps", "online_vs_frozen"]


@pytest.fixture(scope="module")
def grid():
    return Grid(EVIDENCE)


@pytest.fixture(scope="module")
def episodes(grid):
    benchmark = create_benchmark("agentdojo", **grid.options("agentdojo"))
    return {task: benchmark.start(task) for task in benchmark.task_ids()}


def test_the_student_tasks_are_the_suites_tasks_less_those_an_idle_agent_passes(grid, episodes):
    idle_passes = [task for task, episode in episodes.items() if episode.score().details["passes_untouched"]]
    assert idle_passes == [f"banking/user_task_{n}" for n in (5, 6, 8, 9, 10)]
    student = grid.tasks("agentdojo", "student", "qwen15_evidence")
    assert student == [task for task in episodes if task not in idle_passes]
    assert len(student) >= 50 and grid.tasks("agentdojo", "teacher", "oracle_evidence") is None


def test_every_selected_ground_truth_fits_the_step_cap(grid, episodes):
    settings = grid.run_settings("qwen15_evidence", "agentdojo")
    for task in grid.tasks("agentdojo", "student", "qwen15_evidence"):
        turns = episodes[task].reference_turns()
        assert len(turns) == 1  # one user turn: the per-turn cap is the one that binds
        assert len(turns[0]) + 1 <= settings["max_steps_per_turn"] <= settings["max_steps"], task


def test_it_is_built_by_name_never_by_all(grid):
    assert grid.all_targets() == []
    assert set(grid.on_demand()) == {*OUTPUTS, "retrieval_delta"}
    default = Grid(active_config({}, REPO / "config"))
    assert not any("evidence" in path for path in default.all_targets())


def test_its_outputs_plan_its_runs_under_names_of_their_own(grid, tmp_path):
    where, env = make_workdir(tmp_path)
    targets = [path for name in OUTPUTS for path in grid.output_paths(name)]
    assert all(path.startswith("results/cpu_evidence/") for path in targets)
    result = snakemake(where, env, "-n", "--cores", "2", *targets, "--configfile", "config/cpu_evidence.yaml")
    # one oracle run and its bank; zero-shot; wf_st_fn and the online run after it
    assert planned_jobs(result) == {"run_teacher": 1, "build_memory": 1, "run_student_zero_shot": 1,
                                    "run_student_memory": 2, "make_table": 3, "make_figure": 1, "total": 9}
    runs = {path for name in OUTPUTS for path in grid.output_runs(name)}
    assert {layout.describe_run(path)["memcfg"] for path in runs if "student-" in path} == {
        "zero_shot", "wf_st_fn", "wf_st_fn_online"}
    assert all("-qwen15_evidence/" in path or "-oracle_evidence/" in path for path in runs)


def test_its_runs_and_bank_continue_from_its_tracked_release(grid):
    """docs/guides/releases.md: the experiment's outputs go to release/cpu_evidence as they grow, and its jobs start
    from what that folder holds; the folder is never ignored by git."""
    import subprocess

    zero_shot = next(path for path in grid.output_runs("table2_ablation") if "/zero_shot/" in path)
    assert grid.released(zero_shot) == "release/cpu_evidence/" + zero_shot.removeprefix("results/cpu_evidence/") + ".gz"
    assert grid.command(zero_shot).endswith(f" --resume-from {grid.released(zero_shot)}")
    ignored = subprocess.run(["git", "-C", str(REPO), "check-ignore", grid.released(zero_shot),
                              "release/cpu_evidence/agentdojo/bank/amd/b/workflow.faiss"], capture_output=True,
                             text=True, check=False)
    assert ignored.returncode == 1 and not ignored.stdout  # none of them ignored


def test_the_tracked_release_checks_out_with_no_model(tmp_path):
    """The experiment's release as committed (issue 43): every checksum holds, each run's verdicts are what
    AgentDojo's own checker gives, and each released score, table and figure is what its released runs give, rebuilt
    with no model and no network (`amd release check --recheck`)."""
    import shutil
    import subprocess
    import sys

    release = REPO / "release/cpu_evidence"
    if not (release / "MANIFEST.json").exists():
        pytest.skip("release/cpu_evidence holds no sync yet")
    shutil.copytree(release, tmp_path / "release")  # a copy: the check must not need the checkout
    checked = subprocess.run([sys.executable, "-m", "amd.cli", "release", "check", str(tmp_path / "release"),
                              "--recheck"],
                             capture_output=True, text=True, check=False, timeout=900, cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr[-3000:]
    assert "every checksum, score, table and figure matches" in checked.stderr + checked.stdout


def released_row(release, paired: dict, memory: str) -> list[str]:
    """The README's row of one run of the experiment, computed from the release: solved by each verdict with its
    Wilson interval, won / lost against zero-shot with the sign test's p, tasks at the step cap, steps."""
    from amd.analysis.stats import wilson
    from amd.core.files import whole_lines
    from amd.core.schema import parse_line

    run = next(release.glob(f"agentdojo/student-*/**/{memory}/**/trajectories.jsonl.gz"))
    records = [parse_line(line, run, number) for number, line in enumerate(whole_lines(run), start=1)]
    steps = sum(len(turn["steps"]) for record in records for turn in record["turns"])
    capped = sum(record["status"] == "step_limit" for record in records)

    def solved(count: int) -> str:
        low, high = wilson(count, len(records))
        return f"{count} ({100 * count / len(records):.1f} % [{low:.1f}, {high:.1f}])"

    if memory == "zero_shot":  # its counts stand in every memory run's pairs: the first memory run's
        first = next(iter(paired))[0]
        by, strict = paired[(first, "benchmark")]["zero_shot"], paired[(first, "strict")]["zero_shot"]
        return [f"`{memory}`", solved(by), solved(strict), "—", str(capped), str(steps)]
    by, strict = paired[(memory, "benchmark")], paired[(memory, "strict")]
    against = (f"{by['memory_only']} / {by['zero_shot_only']}, p = {by['sign_test_p']:.2f} "
               f"({strict['memory_only']} / {strict['zero_shot_only']}, p = {strict['sign_test_p']:.2f})")
    return [f"`{memory}`", solved(by["with_memory"]), solved(strict["with_memory"]), against, str(capped), str(steps)]


def test_the_readme_and_the_findings_report_the_released_numbers():
    """Issue 43's done-when: the numbers the README and docs/findings give for the evidence run are those of the
    tracked release (its paired table and its runs), row by row."""
    import pandas as pd

    release = REPO / "release/cpu_evidence"
    if not (release / "tables/paired_tasks.csv").exists():
        pytest.skip("release/cpu_evidence holds no finished experiment yet")
    paired = {(row["memory"], row["verdict"]): row
              for row in pd.read_csv(release / "tables/paired_tasks.csv").to_dict("records")}
    for page in [REPO / "README.md", REPO / "docs/findings/index.md"]:
        rows = {line.split("|")[1].strip(): [cell.strip() for cell in line.strip().strip("|").split("|")]
                for line in page.read_text().splitlines() if line.startswith("| `")}
        for memory in ["zero_shot", "wf_st_fn", "wf_st_fn_online"]:
            assert rows.get(f"`{memory}`") == released_row(release, paired, memory), (page.name, memory)
