"""What the tables and figures share: the student runs of a runs frame with their memory label, the mean over
seeds of each cell with its interval (amd.analysis.stats), and a stable order by a list of names."""

import pandas as pd

from amd.analysis.retrieval import pooled
from amd.analysis.stats import interval_columns, interval_of
from amd.core.errors import AmdError
from amd.core.vocabulary import memory_configs

MEMORY_ORDER = [*memory_configs(), "student_memory"]
# a cell's success rate (the benchmark's verdict), its 95 % interval's columns, and the strict verdict's rate beside them
# (amd.benchmarks.base.strict_success: solved and ended by the agent before any step cap)
SUCCESS = ["success", *interval_of("success"), "strict"]


def teacher_models(runs: pd.DataFrame) -> dict:
    teachers = runs[runs["role"] == "teacher"]
    return dict(zip(teachers["teacher"], teachers["model"]))


def _memory_label(row) -> str:
    if row["role"] == "memory" and row["teacher"] == row["student"]:
        return "student_memory"
    return row["memcfg"]


def aggregate(runs: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Mean over seeds of each cell named by `keys`, its Wilson interval over all its task attempts (SUCCESS), the
    std over its runs (none with one run), its run count and what its retrieval saw (pooled). A harness variant's
    runs (a sensitivity setting, the `variant` column) are always a cell apart from the release's."""
    grouped = runs.groupby(cell_keys(runs, keys), dropna=False, sort=False)
    table = grouped.agg(
        model=("model", "first"),
        temperature=("temperature", "first"),
        success=("success_rate", "mean"),
        strict=("strict_rate", "mean"),
        std=("success_rate", "std"),
        runs=("success_rate", "size"),
        successes=("successes", "sum"),
        attempts=("n_tasks", "sum"),
        tasks=("n_tasks", "max"),
        mean_steps=("mean_steps", "mean"),
        step_cap=("step_cap", lambda caps: pd.to_numeric(caps).max()),  # NaN: no run recorded one
        tokens=("tokens", "mean"),
        cost_usd=("cost_usd", lambda costs: pd.to_numeric(costs).mean(skipna=False)),  # unknown stays unknown
        retrieval=("retrieval", pooled),  # what its runs' retrieval saw, per memory type (amd.analysis.retrieval)
    ).reset_index()
    intervals = [interval_columns("success", *counts) for counts in zip(table["successes"], table["attempts"])]
    return table.drop(columns=["successes", "attempts"]).join(pd.DataFrame(intervals, index=table.index, columns=interval_of("success")))


def cell_keys(runs: pd.DataFrame, keys: list[str]) -> list[str]:
    """What a cell of `keys` is grouped by: the keys, and the harness variant wherever the runs say."""
    return [*keys, *(["variant"] if "variant" in runs.columns and "variant" not in keys else [])]


def cell_success(row) -> dict:
    """An aggregated cell's success and its interval columns (SUCCESS), from a row of `aggregate`."""
    return {column: getattr(row, column) for column in SUCCESS}


def run_success(run) -> dict:
    """One run's success and its interval over its tasks (SUCCESS), from a row of the runs frame."""
    return {"success": run["success_rate"], **interval_columns("success", run["successes"], run["n_tasks"]),
            "strict": run["strict_rate"]}


def student_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The student runs (zero-shot, with memory, other) of the runs frame a table gets; AmdError when there is none."""
    students = runs[runs["role"].isin(["zero_shot", "memory", "other"])].copy()
    if students.empty:
        raise AmdError("no student runs among --runs")
    students["memory"] = students.apply(_memory_label, axis=1)
    students["student"] = students["student"].fillna(students["model"])
    return students


def variants_apart(students: pd.DataFrame) -> pd.DataFrame:
    """Student runs whose memory label names their harness variant (`wf_st_fn-paper_text`), for outputs whose rows
    or series are memory labels with no `setting` column (figures, paired tables)."""
    students = students.copy()
    variant = students["variant"].notna()
    students.loc[variant, "memory"] = students.loc[variant, "memory"] + "-" + students.loc[variant, "variant"]
    return students


def order_by(table: pd.DataFrame, column: str, order: list) -> pd.DataFrame:
    rank = {name: i for i, name in enumerate(order)}
    return table.sort_values(column, key=lambda s: s.map(lambda v: rank.get(v, len(rank))), kind="stable")
