"""The paper grid's settings, read from a dry run of `snakemake all` over config/paper.yaml: every number of the
paper (data/paper_reference.csv) has a planned target in the paper's own setting feeding its table or figure (the
paper's model, teacher, protocol and task set, greedy decoding, 2 seeds averaged), every paper table and figure has
its paper setting and our stricter twin beside it, and sampling at 0.7 and the paper's text (where it and the
authors' release disagree) are sensitivity experiments of their own."""

import csv
import itertools
import re
import shlex
from collections import defaultdict
from pathlib import Path

import pytest
from test_pipeline_workflow import job_commands, make_workdir, snakemake

from amd.analysis.layout import describe_run
from amd.analysis.reference import load_reference, paper_protocols
from amd.analysis.runs import model_name
from amd.core.vocabulary import SHARED, ZERO_SHOT

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "data"
AVERAGED = ("appworld", "bfcl", "toolsandbox")  # Table 1's Avg is the mean over these
PAPER_OUTPUTS = ("table1_main", "table2_ablation", "table3_teacher", "table4_representation", "table5_repeats",
                 "table6_protocols", "fig3_steps", "fig4_student_size", "fig5_k_sweep")
SEEDS = {"table5_repeats": 5}  # runs averaged per cell: 2 elsewhere (§4.1), 5 for Table 5 (§B.4)


def read_csv(name: str) -> list[dict]:
    with open(DATA / name, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def stricter_twin(protocol: str) -> str:
    """Our stricter protocol beside a paper protocol: group-level exclusion for `shared` and for the task level."""
    return "self_excluded" if protocol == SHARED else protocol.removesuffix("_task")


class Plan:
    """The dry run's jobs: each run's cell and command-line settings, and each output's input runs."""

    def __init__(self, stdout: str):
        self.runs, self.inputs = {}, defaultdict(set)
        for command in job_commands(stdout):
            words = shlex.split(command)
            for at in range(len(words) - 1):
                if words[at] == "amd" and words[at + 1] in ("run", "table", "figure"):
                    self._read(words[at + 1], words[at + 2:])

    def _read(self, command: str, words: list[str]) -> None:
        if command != "run":
            self.inputs[words[0]] |= set(words[words.index("--runs") + 1: words.index("--note")])
            return
        flags = defaultdict(list)
        for flag, value in itertools.pairwise(words):
            if flag.startswith("--"):
                flags[flag].append(value)
        path = flags["--out"][0]
        self.runs[path] = describe_run(path) | {
            "model": load_reference().paper_model(model_name({"agent": {"spec": flags["--agent"][0]}})),
            "temperature": flags["--temperature"][0], "tasks": flags["--tasks"],
            "options": set(flags["--benchmark-option"]), "memory_options": set(flags["--memory-option"]),
            "delta": flags["--delta"][0] if flags["--delta"] else None}

    def runs_of(self, output: str) -> list[dict]:
        return [self.runs[path] | {"path": path} for path in sorted(self.inputs[output]) if path in self.runs]

    def teacher_model(self, run: dict) -> str | None:
        """The paper's name for the model of the teacher whose memory a student run reads."""
        teacher = f"results/paper/{run['benchmark']}/teacher-{run['teacher']}/trajectories.jsonl"
        return self.runs[teacher]["model"] if teacher in self.runs else None


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    where, env = make_workdir(tmp_path_factory.mktemp("paper"))
    return Plan(snakemake(where, env, "-n", "-p", "all", "--cores", "8", "--configfile", "config/paper.yaml").stdout)


def sampled(run: dict) -> bool:
    """At a temperature above 0 (`none`: a model that takes none, GPT-5, at its own default as in the paper)."""
    return run["temperature"].lower() != "none" and float(run["temperature"]) > 0


def in_paper_setting(run: dict) -> bool:
    """Not sampled, on the whole of the paper's task set (its benchmark options, no task list), in the release's
    harness (no variant)."""
    task_sets = {row["benchmark"]: row["benchmark_options"] for row in read_csv("paper_task_sets.csv")}
    wanted = {option for option in task_sets[run["benchmark"]].split(";") if option}
    return not sampled(run) and not run["tasks"] and wanted <= run["options"] and not run.get("variant")


def matches(plan: Plan, run: dict, row: dict, benchmark: str) -> bool:
    """Whether a planned run is the cell of a reference row, in the paper's setting."""
    memory = row["memory"]
    if run["benchmark"] != benchmark or run["model"] != row["model"] or not in_paper_setting(run):
        return False
    if memory == "teacher":
        return run["role"] == "teacher"
    if memory == ZERO_SHOT:
        return run["role"] == "zero_shot"
    if run["role"] != "memory" or run["protocol"] != row["protocol"]:
        return False
    teacher_is = run["teacher"] == run["student"] if row["teacher"] == "self" else \
        plan.teacher_model(run) == row["teacher"]
    if row["table"] == "table4_representation":
        return teacher_is and run["memcfg"] == "wf_st_fn" and run["representation"] == memory
    if row["table"] == "fig5_k_sweep":
        code, k = memory.split("=")
        others = {c: v for c, v in run["k"].items() if c != code}
        return teacher_is and run["memcfg"] == "wf_st_fn" and run["k"].get(code) == int(k) and \
            set(others.values()) <= {1}
    return teacher_is and run["memcfg"] == ("wf_st_fn" if memory == "student_memory" else memory)


@pytest.mark.parametrize("row", read_csv("paper_reference.csv"),
                         ids=lambda row: f"{row['table']}-{row['benchmark']}-{row['model']}-{row['memory']}")
def test_every_paper_number_has_a_same_setting_target_planned_for_its_output(plan, row):
    for benchmark in AVERAGED if row["benchmark"] == "avg" else (row["benchmark"],):
        found = [run for run in plan.runs_of(row["table"]) if matches(plan, run, row, benchmark)]
        seeds = {run.get("seed") for run in found}
        expected = 1 if row["memory"] == "teacher" else SEEDS.get(row["table"], 2)
        assert len(seeds) == expected, (benchmark, [run["path"] for run in found])


@pytest.mark.parametrize("output", PAPER_OUTPUTS)
def test_every_paper_output_has_its_paper_setting_and_our_stricter_twin_beside_it(plan, output):
    memory_runs = [run for run in plan.runs_of(output) if run["role"] == "memory" and run["model"]]
    paper = [run for run in memory_runs if run["protocol"] in paper_protocols(output) and in_paper_setting(run)]
    assert {run["protocol"] for run in paper} == set(paper_protocols(output))
    planned = {run["path"] for run in memory_runs}
    for run in paper:
        twin = run["path"].replace(f"/{run['protocol']}/", f"/{stricter_twin(run['protocol'])}/")
        assert twin in planned, run["path"]
    per_cell = defaultdict(set)
    for run in paper:
        per_cell[re.sub(r"/seed\d+/", "/", run["path"])].add(run["seed"])
    assert {len(seeds) for seeds in per_cell.values()} == {SEEDS.get(output, 2)}


def test_sampling_at_0_7_is_a_sensitivity_experiment_beside_table5_and_never_a_paper_cell(plan):
    runs = [run for run in plan.runs.values() if sampled(run)]
    assert runs and {run["student"] for run in runs} == {"qwen3_4b_t07"}
    assert {float(run["temperature"]) for run in runs} == {0.7}
    assert {path for path in plan.inputs["table5_repeats"] if "qwen3_4b_t07" in path} == \
        {path for path, run in plan.runs.items() if sampled(run)}
    other_outputs = set().union(*(plan.inputs[name] for name in PAPER_OUTPUTS if name != "table5_repeats"))
    assert not any("qwen3_4b_t07" in path for path in other_outputs)
    # the same cells as Table 5's greedy paper rows: benchmarks, memory, protocol and five seeds
    greedy = {(run["benchmark"], run["memcfg"], run.get("protocol"), run["seed"])
              for run in plan.runs_of("table5_repeats") if run.get("student") == "qwen3_4b" and
              run.get("protocol") in (SHARED, None)}
    assert {(run["benchmark"], run["memcfg"], run.get("protocol"), run["seed"]) for run in runs} == greedy



def test_the_papers_text_runs_beside_the_release_where_they_disagree_and_feeds_table1(plan):
    """BFCL's subtask memory (decomposition at task start vs per turn), ToolSandbox's k_fn and δ_wf, ReasoningBank's
    k: each cell of the paper_text variant is planned beside the release's cell of main_paper."""
    text = {path: run for path, run in plan.runs.items() if run.get("variant") == "paper_text"}
    assert text and set(text) <= plan.inputs["table1_main"]
    assert {run["protocol"] for run in text.values()} == {SHARED} and not any(sampled(r) for r in text.values())
    cell = ("benchmark", "student", "teacher", "memcfg", "protocol", "seed")
    for path, run in text.items():
        (release,) = [other for other in plan.runs_of("table1_main") if other["role"] == "memory"
                      and other["variant"] is None and all(other[key] == run[key] for key in cell)]
        assert f"/{run['memcfg']}-paper_text/" in path and release["path"] != path
        if run["memcfg"] == "reasoningbank":
            assert (run["k"], release["k"]) == ({"rb": 1}, {"rb": 3})
        elif run["benchmark"] == "bfcl":
            assert "per_turn=false" in run["memory_options"] and "turn_memory=system" not in run["memory_options"]
            assert {"per_turn=true", "turn_memory=system"} <= release["memory_options"]
        elif run["benchmark"] == "toolsandbox":
            assert (run["k"]["fn"], release["k"]["fn"]) == (1, 2)
            assert "wf=0.3" in run["delta"] and "wf=0.5" in release["delta"]
    covered = {(run["benchmark"], run["memcfg"]) for run in text.values()}
    assert covered == {("appworld", "reasoningbank"), ("bfcl", "reasoningbank"), ("bfcl", "wf_st_fn"),
                       ("toolsandbox", "reasoningbank"), ("toolsandbox", "wf_st_fn")}
