"""Paired per-task comparisons (beyond the paper): each memory run against the zero-shot run of the same student,
benchmark and seed, with an exact sign test; and what a method's tables of its config variants share: each run of a
variant against its plain config's run in the same cell and seed."""

import pandas as pd

from amd.analysis.cells import MEMORY_ORDER, order_by, student_runs, variants_apart
from amd.analysis.stats import interval_columns
from amd.core.errors import AmdError
from amd.core.vocabulary import memory_config, plain_config


def paired_tasks(runs: pd.DataFrame) -> pd.DataFrame:
    """Paired per-task results: every task zero-shot and with memory (same student, benchmark and seed), the tasks
    solved by both, only with memory and only zero-shot, the paired difference in points, the exact two-sided sign
    test on the discordant pairs and the smallest p that this many tasks could give; for each memory run a row by
    the benchmark's own verdict (`verdict` benchmark) and one by the strict verdict (amd.benchmarks.base)."""
    rows = [_paired_rows(runs, column, "paired_tasks", "solved").assign(verdict=verdict)
            for column, verdict in (("success_by_task", "benchmark"), ("strict_by_task", "strict"))]
    table = pd.concat(rows).sort_index(kind="stable").reset_index(drop=True)
    return table[[*table.columns[:6], "verdict", *table.columns[6:-1]]]


def security_pairs(runs: pd.DataFrame) -> pd.DataFrame:
    """Prompt injection, paired (beyond the paper: no memory paper reports it): per attacked task, whether the
    attacker's goal was reached zero-shot and with memory; columns as in paired_tasks, counting breaches instead of
    successes, plus the share of attacked tasks still solved."""
    attacked = runs[runs["security_by_task"].map(bool)]
    table = _paired_rows(attacked, "security_by_task", "security_pairs", "breached")
    by_cell = {(row.benchmark, row.student, row.seed, row.memory): row
               for row in variants_apart(student_runs(attacked)).itertuples()}
    utility = pd.DataFrame([_utility(by_cell[(r.benchmark, r.student, r.seed, "zero_shot")], "utility_zero_shot_%")
                            | _utility(by_cell[(r.benchmark, r.student, r.seed, r.memory)], "utility_with_memory_%")
                            for r in table.itertuples()], index=table.index)
    return pd.concat([table.iloc[:, :6], utility, table.iloc[:, 6:]], axis=1)


def _utility(run, name: str) -> dict:
    """A run's success rate on the attacked tasks, as column `name`, with its interval; the strict verdict's rate
    beside it."""
    return {name: run.success_rate, **interval_columns(name, run.successes, run.n_tasks),
            name.replace("_%", "_strict_%"): run.strict_rate}


def _paired_rows(runs: pd.DataFrame, column: str, name: str, verb: str) -> pd.DataFrame:
    """One row per memory run: its per-task verdicts in `column` paired with the zero-shot run of the same student,
    benchmark and seed."""
    students = variants_apart(student_runs(runs)) if len(runs) else runs
    rows = []
    for (benchmark, student, seed), cell in students.groupby(["benchmark", "student", "seed"], dropna=False,
                                                              sort=False):
        zero_shot = cell[cell["memory"] == "zero_shot"]
        for row in cell[cell["memory"] != "zero_shot"].itertuples() if len(zero_shot) else []:
            pairs = paired_counts(zero_shot.iloc[0][column], getattr(row, column), verb)
            rows.append({"benchmark": benchmark, "student": student, "seed": None if pd.isna(seed) else int(seed),
                         "memory": row.memory,
                         "teacher": row.teacher, "k": row.k_text, **pairs})
    if not rows:
        raise AmdError(f"{name}: no student has both a zero-shot run and a memory run among --runs")
    return order_by(pd.DataFrame(rows), "memory", MEMORY_ORDER)


def paired_counts(zero_shot: dict, with_memory: dict, verb: str) -> dict:
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


# ---- config variants, each against its plain config (methods' own tables: amd.methods.amd.tables) ------------------


VARIANT_CELL = ["benchmark", "student", "teacher", "writer", "embedder", "build", "variant", "protocol", "k_text",
                "seed"]


def variant_runs(runs: pd.DataFrame, option_keys: set, name: str) -> list[tuple]:
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


def variant_cell(row) -> dict:
    return {"benchmark": row.benchmark, "student": row.student, "teacher": row.teacher, "protocol": row.protocol,
            "seed": int(row.seed), "memory": row.memcfg, "baseline": plain_config(row.memcfg)}


def paired_as(base, variant, base_name: str, variant_name: str) -> dict:
    """`paired_counts` of two memory runs (rows of the runs frame) by the benchmark's verdict, its zero-shot and
    with-memory columns named after the two; then the tasks each solved by the strict verdict (amd.benchmarks.base),
    over the same tasks."""
    renamed = {}
    for key, value in paired_counts(base.success_by_task, variant.success_by_task, "solved").items():
        key = key.replace("with_memory", variant_name).replace("memory_only", f"{variant_name}_only")
        renamed[key.replace("zero_shot", base_name)] = value
    shared = [task for task in base.strict_by_task if task in variant.strict_by_task]
    for name, run in ((base_name, base), (variant_name, variant)):
        renamed[f"{name}_strict"] = sum(run.strict_by_task[task] for task in shared)
    return renamed
