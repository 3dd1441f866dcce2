"""Paired per-task comparisons (beyond the paper): each memory run against the zero-shot run of the same student,
benchmark and seed, with an exact sign test; and each run of a config variant against its plain config in the same
cell and seed (checked decomposition, gated and compressed function memory, online memory)."""

import json

import pandas as pd

from amd.analysis.cells import MEMORY_ORDER, order_by, student_runs
from amd.errors import AmdError
from amd.memory.amd.render import parse_representation
from amd.vocabulary import memory_config, plain_config


def paired_tasks(runs: pd.DataFrame) -> pd.DataFrame:
    """Paired per-task results: every task zero-shot and with memory (same student, benchmark and seed), the tasks
    solved by both, only with memory and only zero-shot, the paired difference in points, the exact two-sided sign
    test on the discordant pairs and the smallest p that this many tasks could give."""
    return _paired_rows(runs, "success_by_task", "paired_tasks", "solved")


def security_pairs(runs: pd.DataFrame) -> pd.DataFrame:
    """Prompt injection, paired (beyond the paper: no memory paper reports it): per attacked task, whether the
    attacker's goal was reached zero-shot and with memory; columns as in paired_tasks, counting breaches instead of
    successes, plus the share of attacked tasks still solved."""
    attacked = runs[runs["security_by_task"].map(bool)]
    table = _paired_rows(attacked, "security_by_task", "security_pairs", "breached")
    utility = {(row.benchmark, row.student, row.seed, row.memory): row.success_rate
               for row in student_runs(attacked).itertuples()}
    table.insert(6, "utility_zero_shot_%", [utility[(r.benchmark, r.student, r.seed, "zero_shot")]
                                             for r in table.itertuples()])
    table.insert(7, "utility_with_memory_%", [utility[(r.benchmark, r.student, r.seed, r.memory)]
                                               for r in table.itertuples()])
    return table


def _paired_rows(runs: pd.DataFrame, column: str, name: str, verb: str) -> pd.DataFrame:
    """One row per memory run: its per-task verdicts in `column` paired with the zero-shot run of the same student,
    benchmark and seed."""
    students = student_runs(runs) if len(runs) else runs
    rows = []
    for (benchmark, student, seed), cell in students.groupby(["benchmark", "student", "seed"], dropna=False,
                                                              sort=False):
        zero_shot = cell[cell["memory"] == "zero_shot"]
        for row in cell[cell["memory"] != "zero_shot"].itertuples() if len(zero_shot) else []:
            pairs = _pairs(zero_shot.iloc[0][column], getattr(row, column), verb)
            rows.append({"benchmark": benchmark, "student": student, "seed": int(seed), "memory": row.memory,
                         "teacher": row.teacher, "k": row.k_text, **pairs})
    if not rows:
        raise AmdError(f"{name}: no student has both a zero-shot run and a memory run among --runs")
    return order_by(pd.DataFrame(rows), "memory", MEMORY_ORDER)


def _pairs(zero_shot: dict, with_memory: dict, verb: str) -> dict:
    """The paired comparison over the tasks both runs have (p values as text: 3 significant digits); `verb` names
    what a true verdict means (solved, breached)."""
    from scipy.stats import binomtest

    shared = [task for task in zero_shot if task in with_memory]
    both = [task for task in shared if zero_shot[task] and with_memory[task]]
    gained = [task for task in shared if with_memory[task] and not zero_shot[task]]
    lost = [task for task in shared if zero_shot[task] and not with_memory[task]]
    discordant = len(gained) + len(lost)
    p = binomtest(len(gained), discordant).pvalue if discordant else 1.0
    smallest = binomtest(len(shared), len(shared)).pvalue if shared else 1.0
    return {"tasks": len(shared), "zero_shot": len(both) + len(lost), "with_memory": len(both) + len(gained),
            "memory_only": len(gained), "zero_shot_only": len(lost),
            "difference_pp": 100.0 * (len(gained) - len(lost)) / len(shared) if shared else None,
            "sign_test_p": f"{p:.3g}", "smallest_p": f"{smallest:.3g}",
            f"{verb}_by_both": " ".join(both), f"{verb}_only_with_memory": " ".join(gained),
            f"{verb}_only_zero_shot": " ".join(lost)}


# ---- beyond the paper: AMD's config variants, each against its plain config ------------------------------------------

VARIANT_CELL = ["benchmark", "student", "teacher", "writer", "embedder", "representation", "protocol", "k_text", "seed"]
DECOMPOSITION_OPTIONS = {"decompose_samples"}
FUNCTION_OPTIONS = {"fn_gate", "representation"}
DECOMPOSITION_NOTE = ("differ: tasks whose merged labels are not the single-shot ones (as sets); *_on_differ: of "
                      "those, the tasks each run solved.")
FUNCTION_NOTE = ("fn_gate repeat: function memory from a function's second error in the task on; fn_form signature: "
                 "one line per function; bank: the bank's default rendering. A hint is one function's memory after "
                 "one error step.")


def decomposition_check(runs: pd.DataFrame) -> pd.DataFrame:
    """Checked decomposition (beyond the paper): n sampled decompositions merged by agreement against the
    single-shot one, in the same cell and seed: how often the merged labels differ, and the tasks solved with each,
    overall (paired, sign test) and on the tasks where they differ."""
    rows = []
    for variant, single in _variant_runs(runs, DECOMPOSITION_OPTIONS, "decomposition_check"):
        differs = [task for task, differ in variant.decomposition_differs_by_task.items() if differ]
        samples = int(dict(memory_config(variant.memcfg).options)["decompose_samples"])
        rows.append({**_variant_cell(variant), "samples": samples,
                     "differ": len(differs), "differ_%": 100.0 * len(differs) / max(variant.n_tasks, 1),
                     "single_shot_on_differ": sum(single.success_by_task.get(task, False) for task in differs),
                     "checked_on_differ": sum(variant.success_by_task.get(task, False) for task in differs),
                     **_paired_as(single.success_by_task, variant.success_by_task, "single_shot", "checked")})
    table = pd.DataFrame(rows)
    table.attrs["notes"] = [DECOMPOSITION_NOTE]
    return table


def function_gating(runs: pd.DataFrame) -> pd.DataFrame:
    """Gated and compressed function memory (beyond the paper): each variant against always-on function memory
    (wf_st_fn) in the same cell and seed: hints given and withheld per task, prompt tokens per task, and the tasks
    solved by each (paired, sign test)."""
    rows = []
    for variant, always in _variant_runs(runs, FUNCTION_OPTIONS, "function_gating"):
        options = dict(memory_config(variant.memcfg).options)
        rows.append({**_variant_cell(variant), "fn_gate": options.get("fn_gate", "always"),
                     "fn_form": parse_representation(options.get("representation", "")).get("function", "bank"),
                     "hints_per_task_always_on": always.function_hints / max(always.n_tasks, 1),
                     "hints_per_task": variant.function_hints / max(variant.n_tasks, 1),
                     "withheld_per_task": variant.function_hints_withheld / max(variant.n_tasks, 1),
                     "prompt_tokens_per_task_always_on": always.prompt_tokens / max(always.n_tasks, 1),
                     "prompt_tokens_per_task": variant.prompt_tokens / max(variant.n_tasks, 1),
                     **_paired_as(always.success_by_task, variant.success_by_task, "always_on", "variant")})
    table = pd.DataFrame(rows)
    table.attrs["notes"] = [FUNCTION_NOTE]
    return table


def _variant_runs(runs: pd.DataFrame, option_keys: set, name: str) -> list[tuple]:
    """(variant run, run of its plain config in the same cell and seed) for every run of a config variant whose
    options include one of `option_keys`."""
    students = student_runs(runs)
    memory_runs = students[students["role"] == "memory"]
    by_cell = {(tuple(getattr(row, c) for c in VARIANT_CELL), row.memcfg): row for row in memory_runs.itertuples()}
    pairs = []
    for (cell, memcfg), row in by_cell.items():
        base = plain_config(memcfg)
        if base and option_keys & set(dict(memory_config(memcfg).options)) and (cell, base) in by_cell:
            pairs.append((row, by_cell[(cell, base)]))
    if not pairs:
        raise AmdError(f"{name}: no run of a config variant ({', '.join(sorted(option_keys))}) has a run of its "
                       "plain config in the same cell and seed among --runs")
    return pairs


def _variant_cell(row) -> dict:
    return {"benchmark": row.benchmark, "student": row.student, "teacher": row.teacher, "protocol": row.protocol,
            "seed": int(row.seed), "memory": row.memcfg, "baseline": plain_config(row.memcfg)}


def _paired_as(base: dict, variant: dict, base_name: str, variant_name: str) -> dict:
    """`_pairs` of two memory runs, its zero-shot and with-memory columns named after the two."""
    renamed = {}
    for key, value in _pairs(base, variant, "solved").items():
        key = key.replace("with_memory", variant_name).replace("memory_only", f"{variant_name}_only")
        renamed[key.replace("zero_shot", base_name)] = value
    return renamed


def online_vs_frozen(runs: pd.DataFrame) -> pd.DataFrame:
    """Online memory vs the same memory frozen (beyond the paper): each online run paired per task with the frozen
    run of the same cell and seed; columns as in paired_tasks, named frozen and online, plus what the online run
    added to its bank (from its history): entries added, near-duplicates dropped, tasks that retrieved an added
    entry."""
    rows = []
    for online, frozen in _variant_runs(runs, {"online"}, "online_vs_frozen"):
        rows.append({**_variant_cell(online), "k": online.k_text,
                     **_paired_as(frozen.success_by_task, online.success_by_task, "frozen", "online"),
                     **_online_growth(online.path)})
    return pd.DataFrame(rows)


def _online_growth(run_path: str) -> dict:
    """From the run's online history (amd.memory.online), where there is one: entries added, near-duplicates
    dropped, and tasks that retrieved an entry added before them."""
    from amd.memory.online import history_path

    path = history_path(run_path)
    if not path.exists():
        return {"entries_added": None, "duplicates_dropped": None, "tasks_using_added": None}
    events = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()[1:] if line.strip()]
    added, using = set(), 0
    for event in events:
        using += bool(added & set(event["retrieved"]))
        added |= {entry["id"] for entry in event["added"]}
    return {"entries_added": len(added), "duplicates_dropped": sum(d["dropped"] for e in events for d in e["dedup"]),
            "tasks_using_added": using}

