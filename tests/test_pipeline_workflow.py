"""The Snakemake workflow: config validation, dry-runs of both grids, and rerun precision.

Runs happen in a copy of the workflow under tmp_path with a stand-in `amd` (tests/slurm/fake_amd.py) first on
PATH, so jobs take milliseconds and the real analysis code still makes the tables.
"""

import itertools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from workflow_lint import lint_problems

from amd.core.vocabulary import output_names

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = Path(sys.executable).parent / "snakemake"
WORKFLOW_FILES = ("Snakefile", "rules", "config", "report", "profiles", "environment.yml")


@pytest.fixture
def workdir(tmp_path):
    return make_workdir(tmp_path)


def make_workdir(where: Path):
    """A copy of the workflow with a fake `amd` on PATH; returns (dir, env)."""
    for name in WORKFLOW_FILES:
        source = REPO / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, where / name)
    bin_dir = where / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "amd"
    fake.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{REPO / "tests/slurm/fake_amd.py"}" "$@"\n')
    fake.chmod(0o755)
    env = os.environ | {"PATH": f"{bin_dir}:{Path(sys.executable).parent}:{os.environ['PATH']}",
                        "FAKE_AMD_LOG": str(where / "amd_calls.jsonl"), "PYTHONPATH": str(REPO)}
    return where, env


def snakemake(where, env, *args, check=True):
    result = subprocess.run([str(SNAKEMAKE), *args], check=False, cwd=where, env=env, capture_output=True,
                            text=True, timeout=300)
    if check and result.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result


def planned_jobs(result) -> dict:
    """The 'Job stats' table of a dry-run as {rule: count} (empty when nothing is to be done)."""
    text = result.stdout + result.stderr
    if "Nothing to be done" in text:
        return {}
    block = text.split("Job stats:", 1)[1]
    counts = {}
    for line in block.splitlines()[3:]:
        match = re.match(r"^(\w+)\s+(\d+)$", line.strip())
        if not match:
            break
        counts[match.group(1)] = int(match.group(2))
    return counts


def job_commands(stdout: str) -> list[str]:
    """Every job's `amd` command in a dry run with -p: a rule's shell command, and each job of a model server's
    batch (rules/serve.smk: `amd serve-batch ... --job LOG COMMAND ...`) on its own."""
    commands = []
    for line in stdout.splitlines():
        if not line.startswith("Shell command: "):
            continue
        command = line.removeprefix("Shell command: ").split(" > ", 1)[0]
        words = shlex.split(command)
        if words[:2] == ["amd", "serve-batch"]:
            commands += [words[at + 2] for at, word in enumerate(words) if word == "--job"]
        else:
            commands.append(command)
    return commands


def served_runs(stdout: str, *words: str) -> list[str]:
    """The commands of a dry run's served runs (a model at the batch's server) holding every one of `words`."""
    return [command for command in job_commands(stdout)
            if "amd run" in command and "@{base_url}" in command and all(word in command for word in words)]


def overlay(where, name, data) -> str:
    path = Path(where) / name
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_default_config_plans_the_small_ablation(workdir):
    where, env = workdir
    jobs = planned_jobs(snakemake(where, env, "-n", "all", "--cores", "2"))
    assert jobs == {"run_teacher": 1, "build_memory": 1, "run_student_zero_shot": 1, "run_student_memory": 2,
                    "score_run": 4, "view_run": 3, "make_table": 4, "make_figure": 1, "all": 1, "total": 18}


def test_paper_grid_and_k_sweep_plan(workdir):
    """What the paper grid plans; how long planning takes is bench/bench_plan.py's figure, not a test's."""
    where, env = workdir
    result = snakemake(where, env, "-n", "-p", "all", "--cores", "8", "--configfile", "config/paper.yaml")
    jobs = planned_jobs(result)
    paper = yaml.safe_load((REPO / "config/paper.yaml").read_text())["experiments"].values()
    outputs = {name for experiment in paper for name in experiment["outputs"]}
    assert jobs["make_table"] == len(outputs & set(output_names("table"))) >= 6 and jobs["make_figure"] == 3
    assert len(served_runs(result.stdout, "--memory ")) > 100 and "run_student_memory" not in jobs
    k_sweep_plan = snakemake(where, env, "-n", "-p", "results/paper/fig5_k_sweep.pdf", "--cores", "8",
                             "--configfile", "config/paper.yaml")
    k_sweep = planned_jobs(k_sweep_plan)
    # base k plus k = 2..5 for each of wf, st, fn; two seeds each; in the paper's setting and our stricter twin
    # (a target runs whole batches: a batch's other jobs are the grid's too)
    assert len(served_runs(k_sweep_plan.stdout, "amd run appworld", "--memory ")) >= (1 + 3 * 4) * 2 * 2
    # Figure 5 is AppWorld's: its teacher, bank and runs, after AppWorld's environment is set up once
    assert k_sweep["setup_benchmark"] == 1 and k_sweep["run_teacher"] == 1 and k_sweep["build_memory"] == 1


def test_paper_grid_plans_table1_with_the_baseline_rows_for_every_benchmark_and_student(workdir):
    where, env = workdir
    result = snakemake(where, env, "-n", "-p", "results/paper/tables/table1_main.md", "--cores", "1",
                       "--configfile", "config/paper.yaml")
    paper_config = yaml.safe_load((REPO / "config/paper.yaml").read_text())
    paper = paper_config["experiments"]["main"]
    jobs = planned_jobs(result)
    assert jobs["build_memory"] >= len(paper["benchmarks"]) * 4  # amd and the three baselines (and whole batches')
    runs = set(re.findall(r"results/paper/(\w+)/student-(\w+)/gpt5mini-gpt5mini-te3small([-\w]*)/(\w+)/self_excluded/"
                          r"k_(\w+)/seed\d/trajectories.jsonl", result.stdout))
    for benchmark, student in itertools.product(paper["benchmarks"], paper["students"]):
        # AMD's k as the benchmark's harness sets it (ToolSandbox: the release's k_fn 2)
        amd_k = {"wf": 1, "st": 1, "fn": 1} | paper_config["benchmarks"][benchmark].get("k", {})
        # AMD's banks carry their representation (a setting of AMD's), the baselines' nothing after the embedder
        for memcfg, k, build in (("reasoningbank", "rb3", ""), ("memp", "memp3", ""), ("sasm", "sasm1", ""),
                                 ("wf_st_fn", "_".join(f"{code}{n}" for code, n in amd_k.items()), "-amd")):
            assert (benchmark, student, build, memcfg, k) in runs, (benchmark, student, memcfg)
    builds = [line for line in job_commands(result.stdout) if "amd memory build" in line]
    assert {re.search(r"--method (\w+)", line).group(1) for line in builds} == {"amd", "reasoningbank", "memp", "sasm"}
    # the paper's students prompt as the authors' harness of each benchmark does (BFCL's and ToolSandbox's own
    # messages, amd's prompt for AppWorld's code agent), whatever the embedded default (json, for CPU models) says
    student_runs = [line for line in job_commands(result.stdout) if "amd run" in line and "student-" in line]
    prompting = {benchmark: paper_config["benchmarks"][benchmark].get("run", {}).get("prompting", "amd")
                 for benchmark in paper["benchmarks"]}
    assert set(prompting.values()) == {"amd", "official"}
    benchmark_of = {line: re.search(r"amd run (\w+)", line).group(1) for line in student_runs}
    assert student_runs and all(f"--prompting {prompting[benchmark_of[line]]}" in line for line in student_runs)


def test_paper_grid_plans_the_amd_variants_beside_the_always_on_runs_they_pair_with(workdir):
    where, env = workdir
    result = snakemake(where, env, "-n", "-p", "results/paper/tables/decomposition_check.md",
                       "results/paper/tables/function_gating.md", "--cores", "1", "--configfile", "config/paper.yaml")
    runs = set(re.findall(r"results/paper/(\w+)/student-(\w+)/gpt5mini-gpt5mini-te3small-amd/(\w+)/self_excluded/"
                          r"k_wf1_st1_fn1/seed(\d)/trajectories.jsonl", result.stdout))
    checked = ("wf_st_fn", "wf_st_fn_checked")
    gated = ("wf_st_fn", "wf_st_fn_gated", "wf_st_fn_signature", "wf_st_fn_gated_signature")
    benchmarks, seeds = ("appworld", "bfcl"), ("0", "1")
    assert runs >= set(itertools.product(benchmarks, ("qwen3_4b", "gemma4_e4b"), checked, seeds)) | \
        set(itertools.product(benchmarks, ("llama31_8b", "gemma4_e4b"), gated, seeds))  # whole batches run
    assert planned_jobs(result)["make_table"] == 2
    paper = yaml.safe_load((REPO / "config/paper.yaml").read_text())
    options = [(re.search(r"amd run (\w+)", line).group(1), re.findall(r"--memory-option '?(\w+)=", line))
               for line in job_commands(result.stdout) if "--memory-config wf_st_fn_" in line]
    # the grid's own and the benchmark's harness; the variant's config brings the rest
    assert options and all(found == sorted({"per_turn"} | set(paper["benchmarks"][benchmark]["memory_options"]["amd"]))
                           for benchmark, found in options)


def test_a_writer_that_refuses_a_temperature_is_sent_none(workdir):
    where, env = workdir
    result = snakemake(where, env, "-n", "-p", "results/paper/fig4_student_size.pdf", "--cores", "1",
                       "--configfile", "config/paper.yaml")
    builds = [line for line in job_commands(result.stdout) if "amd memory build" in line and "gpt-5-mini" in line]
    params = "'{\"temperature\": null, \"max_tokens\": 16384}'"  # GPT-5: no temperature, a reasoning budget
    assert builds and all(f"--writer openai:gpt-5-mini --writer-params {params}" in line for line in builds)
    default = job_commands(snakemake(where, env, "-n", "-p", "--cores", "1", "all").stdout)
    rules_builds = [line for line in default if "amd memory build" in line]
    assert rules_builds and not any("--writer-params" in line for line in rules_builds)


def test_the_paper_grid_has_each_teacher_write_its_own_memory_for_table3(workdir):
    """Paper §3.1: the teacher writes its own memory (`writer: teacher`), so Table 3 plans one bank per teacher, each
    written by that teacher's model (served by the job for the vLLM teacher)."""
    where, env = workdir
    lines = job_commands(snakemake(where, env, "-n", "-p", "results/paper/tables/table3_teacher.md", "--cores", "1",
                                   "--configfile", "config/paper.yaml").stdout)
    table3 = {f"results/paper/appworld/bank/amd/{t}-{t}-te3small-amd" for t in
              ("gpt55", "deepseek_v4_pro", "gpt5mini", "qwen3_32b")}
    builds = [line for line in lines if "amd memory build" in line and line.split("--out ")[1].split()[0] in table3]
    writers = {re.search(r"--writer (\S+)", line).group(1).strip("'") for line in builds}
    assert writers == {"openai:gpt-5.5", "openai:deepseek-v4-pro", "openai:gpt-5-mini",
                       "vllm:Qwen/Qwen3-32B@{base_url}"}, writers
    banks = {re.search(r"--out (results/paper/appworld/bank/amd/\S+)", line).group(1) for line in builds}
    assert banks == {f"results/paper/appworld/bank/amd/{t}-{t}-te3small-amd" for t in
                     ("gpt55", "deepseek_v4_pro", "gpt5mini", "qwen3_32b")}


def test_the_paper_grid_runs_toolsandbox_with_its_user_simulator(workdir):
    """Table 1's third column and Figure 3: the teacher and 4 students x 5 memory settings (zero-shot, the three
    baselines, AMD) x 2 seeds on the paper's 129 ToolSandbox scenarios, the four memory settings in the paper's
    setting and in our stricter twin, every run with GPT-5-mini as the user simulator (no temperature, a reasoning
    budget)."""
    where, env = workdir
    user = ("--benchmark-option scenarios=base --benchmark-option user_max_tokens=16384 "
            "--benchmark-option user_model=openai:gpt-5-mini --benchmark-option user_temperature=none")
    for target, expected in (("results/paper/fig3_steps.pdf", 1 + 4 * 2 + 4 * 4 * 2 * 2),
                             # and the paper's text beside the release (variant paper_text): ReasoningBank and AMD
                             ("results/paper/tables/table1_main.md", 1 + 4 * 2 + 4 * 4 * 2 * 2 + 4 * 2 * 2)):
        lines = job_commands(snakemake(where, env, "-n", "-p", target, "--cores", "1", "--configfile",
                                       "config/paper.yaml").stdout)
        runs = [line for line in lines if "amd run toolsandbox" in line]
        assert len(runs) >= expected and all(user in line for line in runs), target  # whole batches run


def test_slurm_executor_dry_run_plans_gpu_jobs(workdir):
    where, env = workdir
    result = snakemake(where, env, "-n", "-p", "results/paper/fig4_student_size.pdf", "--configfile",
                       "config/paper.yaml", "--profile", "profiles/slurm")
    # 4 students x 2 seeds, paper setting and twin, in one cluster job per model server
    assert len(served_runs(result.stdout, "--memory ")) >= 16  # whole batches run
    batches = [rule for rule in planned_jobs(result) if rule.startswith("serve_batch_")]
    assert len(batches) >= 4 and all(planned_jobs(result)[rule] == 1 for rule in batches)


def test_a_bad_value_is_rejected_before_any_job_naming_the_key(workdir):
    where, env = workdir
    bad = overlay(where, "bad.yaml", {"defaults": {"protocol": "leaky"}})
    result = snakemake(where, env, "all", "--cores", "2", "--configfile", bad, check=False)
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "config: defaults.protocol: 'leaky' is not a known protocol" in output
    assert not (where / "amd_calls.jsonl").exists()
    unknown = overlay(where, "unknown.yaml", {"experiments": {"ablation": {"students": ["nobody"]}}})
    result = snakemake(where, env, "-n", "all", "--cores", "2", "--configfile", unknown, check=False)
    assert result.returncode != 0
    assert "experiments.ablation.students: 'nobody' is not defined" in result.stdout + result.stderr


def test_run_then_change_one_thing_reruns_exactly_the_dependent_jobs(workdir):
    where, env = workdir
    started = snakemake(where, env, "all", "--cores", "2").stderr
    # Snakemake's header lists only --configfile files: the workflow names the files it layers, and what --cores caps
    assert "amd: config files in use, in order: config/base.yaml, config/config.yaml (the embedded default)" in started
    assert "amd: --cores 2 is how many jobs may run at once, not threads" in started
    table = (where / "results/tables/table2_ablation.md").read_text()
    assert "wf_st_fn" in table and "not the paper's effect sizes" in table
    assert (where / "results/fig3_steps.pdf").read_bytes().startswith(b"%PDF")
    memory_run = "results/agentdojo/student-qwen15/oracle-rules-minilm-amd/wf_st_fn/self_excluded/k_wf1_st1_fn1/seed0"
    assert "<h1>wf_st_fn on agentdojo beside zero_shot</h1>" in (where / memory_run / "view.html").read_text()
    assert planned_jobs(snakemake(where, env, "-n", "all", "--cores", "2")) == {}
    snakemake(where, env, "--report", "report.html", "--cores", "1")
    html = (where / "report.html").read_text()
    assert "Tables" in html and "Figures" in html and "table2_ablation" in html

    # k of subtask memory: only the wf_st_fn runs use it, frozen and online (new paths), then their scores and pages,
    # the tables and the figure
    k = overlay(where, "k.yaml", {"defaults": {"k": {"wf": 1, "st": 2, "fn": 1}}})
    assert planned_jobs(snakemake(where, env, "-n", "all", "--cores", "2", "--configfile", k)) == {
        "run_student_memory": 2, "score_run": 2, "view_run": 2, "make_table": 4, "make_figure": 1, "all": 1,
        "total": 12}

    # the embedder's subtask delta: a params change of the two runs that retrieve subtask memory
    delta = overlay(where, "delta.yaml", {"embedders": {"minilm": {"spec": "local:all-minilm-l6-v2",
                                                                   "delta": {"wf": 0.32, "st": 0.5}}}})
    assert planned_jobs(snakemake(where, env, "-n", "all", "--cores", "2", "--configfile", delta)) == {
        "run_student_memory": 2, "score_run": 2, "view_run": 2, "make_table": 4, "make_figure": 1, "all": 1,
        "total": 12}

    # sampling temperature: every student run, never the oracle teacher or the memory bank
    temperature = overlay(where, "t.yaml", {"run": {"temperature": 0.7}})
    assert planned_jobs(snakemake(where, env, "-n", "all", "--cores", "2", "--configfile", temperature)) == {
        "run_student_zero_shot": 1, "run_student_memory": 2, "score_run": 3, "view_run": 3, "make_table": 4,
        "make_figure": 1, "all": 1, "total": 15}

    # one more student: its two runs, scores and pages, then the outputs; teacher and bank are reused
    student = overlay(where, "s.yaml", {"experiments": {"ablation": {"students": ["qwen15", "qwen05"]}}})
    calls_log = where / "amd_calls.jsonl"
    before = len(calls_log.read_text().splitlines())
    snakemake(where, env, "all", "--cores", "2", "--configfile", student)
    calls = [json.loads(line) for line in calls_log.read_text().splitlines()[before:]]
    assert sorted(call[0] for call in calls) == ["figure", "run", "run", "score", "score", "table", "table", "table",
                                                 "view", "view"]
    assert all("local:qwen2.5-coder-0.5b" in call for call in calls if call[0] == "run")
    assert planned_jobs(snakemake(where, env, "-n", "all", "--cores", "2", "--configfile", student)) == {}


def test_the_default_runs_the_online_cell_after_the_frozen_one_and_pairs_them(workdir):
    """The embedded default's online experiment shares its frozen wf_st_fn cell with the ablation: one more student
    run (--memory-config wf_st_fn_online), which waits for the frozen run so that it finds that run's replies in the
    response cache until it retrieves otherwise, and the online_vs_frozen table."""
    where, env = workdir
    result = snakemake(where, env, "-n", "-p", "all", "--cores", "2")
    runs = [line for line in result.stdout.splitlines() if "amd run" in line and "wf_st_fn_online" in line]
    assert len(runs) == 1 and "--memory-config wf_st_fn_online" in runs[0]
    (reason,) = re.findall(r"wf_st_fn_online memory.*\nReason: (.*)", result.stdout)
    frozen = "results/agentdojo/student-qwen15/oracle-rules-minilm-amd/wf_st_fn/self_excluded/k_wf1_st1_fn1/seed0/"
    assert f"{frozen}trajectories.jsonl" in reason.split("Input files updated by another job: ")[1]
    snakemake(where, env, "results/tables/online_vs_frozen.md", "--cores", "2")
    table = (where / "results/tables/online_vs_frozen.md").read_text()
    assert "| wf_st_fn " in table and "wf_st_fn_online" in table


def pools_overlay(where, prefer="oracle_b", **extra) -> str:
    """The default plus a second oracle teacher and two pools of both: one in the pool's order, one preferring
    `prefer`; one experiment with each teacher's memory and each pool's."""
    return overlay(where, "pools.yaml", {
        "teachers": {"oracle": {"spec": "oracle"}, "oracle_b": {"spec": "oracle", "max_steps": 30}},
        "teacher_pools": {"both": {"teachers": ["oracle", "oracle_b"]},
                          "both_b": {"teachers": ["oracle", "oracle_b"], "prefer": prefer}},
        "experiments": {"multi": {"benchmarks": ["bfcl"], "students": ["qwen05"], "memory_configs": ["wf_st_fn"],
                                  "teachers": ["oracle", "oracle_b", "both", "both_b"],
                                  "outputs": ["table_multi_teacher"]}}} | extra)


def test_a_pooled_bank_is_planned_from_its_teachers_banks_and_runs(workdir):
    where, env = workdir
    target = "results/tables/table_multi_teacher.md"
    result = snakemake(where, env, "-n", "-p", target, "--cores", "1", "--configfile", pools_overlay(where))
    assert planned_jobs(result) == {"run_teacher": 2, "build_memory": 2, "pool_memory": 2, "run_student_memory": 4,
                                    "make_table": 1, "total": 11}
    bank = "results/bfcl/bank/amd/{}-rules-minilm-amd"
    pools = [line[line.index("amd memory pool"):] for line in result.stdout.splitlines() if "amd memory pool" in line]
    assert sorted(pools) == sorted(
        f"amd memory pool --banks {bank.format('oracle')} {bank.format('oracle_b')} --teachers oracle oracle_b "
        f"--out {bank.format(name)} > results/logs/bfcl/bank/amd/{name}-rules-minilm-amd/pool.log 2>&1"
        for name in ("both", "both_b"))
    runs = [line for line in result.stdout.splitlines() if "amd run bfcl --agent local:" in line]
    assert len(runs) == 4
    for line in runs:
        pooled = re.search(r"--memory results/bfcl/bank/amd/(\w+)-rules", line).group(1)
        assert ("--memory-option prefer_teacher=oracle_b" in line) == (pooled == "both_b"), line
    # the table shows each teacher's own run beside the students' (the members' runs, never a pool's)
    table = next(line for line in result.stdout.splitlines() if "amd table table_multi_teacher" in line)
    assert "teacher-oracle/trajectories.jsonl" in table and "teacher-oracle_b/" in table and "teacher-both" not in table


def test_changing_the_preferred_teacher_reruns_only_that_pools_runs(workdir):
    where, env = workdir
    target = "results/tables/table_multi_teacher.md"
    snakemake(where, env, target, "--cores", "2", "--configfile", pools_overlay(where))
    assert "both_b" in (where / target).read_text()
    assert planned_jobs(snakemake(where, env, "-n", target, "--cores", "2", "--configfile",
                                  pools_overlay(where, prefer="oracle"))) == {
        "run_student_memory": 1, "make_table": 1, "total": 2}


@pytest.mark.parametrize("change, message", [
    ({"teacher_pools": {"both": {"teachers": ["oracle", "nobody"]}}},
     "teacher_pools.both.teachers: 'nobody' is not defined under `teachers`"),
    ({"teacher_pools": {"both": {"teachers": ["oracle", "oracle_b"], "prefer": "qwen05"}}},
     "teacher_pools.both.prefer: 'qwen05' is not one of its teachers"),
    ({"teacher_pools": {"qwen05": {"teachers": ["oracle", "oracle_b"]}}},
     "teacher_pools.qwen05: the name is already an agent's"),
    ({"teacher_pools": {"both": {"teachers": ["oracle"]}}}, "teacher_pools.both.teachers: the list needs at least 2 items"),
    ({"defaults": {"teacher": "oracle", "writer": "teacher", "embedder": "minilm", "representation": "amd",
                   "protocol": "self_excluded", "k": {}, "delta": {}, "split_seed": 0, "seeds": [0]}},
     "writer 'oracle' has no model to write memory with"),
])
def test_a_bad_pool_is_rejected_naming_the_key(workdir, change, message):
    where, env = workdir
    config = yaml.safe_load(Path(pools_overlay(where)).read_text())
    teachers = {"teachers": config["teachers"]} if "teachers" not in change else {}
    bad = overlay(where, "bad_pool.yaml", config | teachers | change)
    result = snakemake(where, env, "-n", "all", "--cores", "1", "--configfile", bad, check=False)
    assert result.returncode != 0 and message in result.stdout + result.stderr


def test_local_model_jobs_never_run_more_than_the_profiles_cap_at_once(workdir):
    where, env = workdir
    times = where / "times.jsonl"
    env = env | {"FAKE_AMD_RUN_SECONDS": "0.5", "FAKE_AMD_TIMES": str(times)}
    seeds = overlay(where, "seeds.yaml", {"defaults": {"seeds": [0, 1]}})
    snakemake(where, env, "all", "--cores", "8", "--configfile", seeds)
    spans = sorted((r["start"], r["end"]) for r in map(json.loads, times.read_text().splitlines())
                   if r["agent"].startswith("local:"))
    assert len(spans) == 6  # zero-shot, wf_st_fn and wf_st_fn_online, two seeds each
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans], key=lambda e: (e[0], e[1]))
    in_flight = list(itertools.accumulate(change for _, change in events))
    assert max(in_flight) == 2, spans  # profiles/default: local_llm 2 (one 1-thread server per core)


def test_lint_and_snakefmt_are_clean():
    assert lint_problems(SNAKEMAKE) == []  # but the rules' conda environment: none can build amd (workflow_lint.py)
    rules = [REPO / "Snakefile", *sorted((REPO / "rules").glob("*.smk"))]
    assert not [path.name for path in rules if re.search(r"^\s*(conda|container):", path.read_text(), re.MULTILINE)]
    fmt = subprocess.run([str(Path(sys.executable).parent / "snakefmt"), "--check", "."], check=False,
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr
