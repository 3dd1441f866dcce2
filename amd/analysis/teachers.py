"""Tables about teachers (beyond the paper): a bank pooled from several teachers against each single teacher's,
and the teacher-student fit probe ranked and checked against the grid."""

import pandas as pd

from amd.analysis.cells import SUCCESS, aggregate, cell_success, run_success, student_runs
from amd.analysis.stats import interval_columns, interval_of
from amd.core.errors import AmdError
from amd.core.vocabulary import PREFER_TEACHER


def table_multi_teacher(runs: pd.DataFrame) -> pd.DataFrame:
    """Several teachers (beyond the paper): success with each single teacher's memory and with a bank pooled from several.

    Each teacher's own success first; then per student, memory config and protocol, a row per single teacher's
    bank and per pooled bank (pool: its teachers in priority order; prefer: the preferred teacher; memory_from:
    how many tasks' memory came from each teacher); vs_best_single = the row - the best single teacher's row."""
    teachers = runs[runs["role"] == "teacher"]
    rows = [{"benchmark": t["benchmark"], "acting": "teacher itself", "teacher": t["teacher"], **run_success(t),
             "runs": 1, "tasks": t["n_tasks"]} for _, t in teachers.iterrows()]
    students = student_runs(runs)
    students = students[students["role"] == "memory"]
    described = pd.DataFrame([_pool_columns(pool) for pool in students["pool"]], index=students.index)
    students = students.drop(columns="pool").join(described)
    if not (students["pool"] != "—").any():
        raise AmdError("table_multi_teacher: no run with a pooled bank among --runs (name a `teacher_pools` entry "
                       "as an experiment's teacher)")
    cell = ["benchmark", "student", "memory", "protocol"]
    cells = aggregate(students, [*cell, "teacher", "pool", "prefer", "memory_from"])
    cells = cells.assign(pooled=cells["pool"] != "—").sort_values(["benchmark", "student", "pooled"], kind="stable")
    best = cells[cells["pool"] == "—"].groupby(cell, dropna=False)["success"].max()
    for row in cells.itertuples():
        single = best.get((row.benchmark, row.student, row.memory, row.protocol))
        rows.append({"benchmark": row.benchmark, "acting": row.student, "memory": row.memory,
                     "protocol": row.protocol, "teacher": row.teacher, "pool": row.pool, "prefer": row.prefer,
                     "memory_from": row.memory_from, **cell_success(row),
                     "vs_best_single": None if single is None else row.success - single, "std": row.std,
                     "runs": row.runs, "tasks": row.tasks})
    table = pd.DataFrame(rows)
    return table.sort_values(["benchmark"], kind="stable")[
        ["benchmark", "acting", "memory", "protocol", "teacher", "pool", "prefer", "memory_from", *SUCCESS,
         "vs_best_single", "std", "runs", "tasks"]]


def _pool_columns(pool: dict | None) -> dict:
    """A run's pooled bank as text: its teachers in priority order, the preferred one, tasks' memory by teacher."""
    if not pool:
        return {"pool": "—", "prefer": "—", "memory_from": "—"}
    return {"pool": "+".join(pool["teachers"]), "prefer": pool.get(PREFER_TEACHER) or "—",
            "memory_from": ", ".join(f"{name} {count}" for name, count in pool["tasks_by_teacher"].items())}


PROBE_NOTE = ("probe_success: the student's success (%) on the probe set with the teacher's memory (mean over probe "
              "runs); grid_success: the same cell's success in the grid (mean over its seeds) on the tasks outside "
              "the probe set, so the probe's own tasks cannot inflate the correlation; ranks: 1 = best, ties share "
              "the best rank.")
CORRELATION_NOTE = ("spearman_rho, kendall_tau: rank correlation of probe_success and grid_success over the teachers "
                    "that have both (teachers_compared; none below 2 teachers or when one side is constant; kendall_p: "
                    "scipy's two-sided p, which few teachers keep large); "
                    "teacher_success_rho: the same for the teachers' own success, the guess a probe has to beat.")
PROBE_CELL = ["benchmark", "student", "writer", "embedder", "build", "memcfg", "protocol", "k_text"]


def probe_fit(runs: pd.DataFrame) -> pd.DataFrame:
    """Teacher–student fit probe (beyond the paper): per student, the teachers ranked by a small probe set.

    Each teacher's probe score (the student's success on the probe set with that teacher's memory) and rank; the
    grid's success with the same memory on its tasks outside the probe set, where the grid has run it, and rank;
    the rank correlation of the two over the teachers (Spearman, Kendall; scipy) and, as a baseline, that of the
    teachers' own success rates."""
    probes, grid = runs[runs["role"] == "probe"], runs[runs["role"] == "memory"]
    if probes.empty:
        raise AmdError("probe_fit: no probe runs among --runs (amd probe; experiments with probe: true)")
    own = {(row.benchmark, row.teacher): row for row in runs[runs["role"] == "teacher"].itertuples()}
    parts = []
    for cell, group in probes.groupby(PROBE_CELL, sort=False):
        probe_set = frozenset().union(*group["task_ids"])
        in_cell = grid[(grid[PROBE_CELL] == pd.Series(cell, index=PROBE_CELL)).all(axis=1)]
        rows = [_probe_row(dict(zip(PROBE_CELL, cell)), teacher, mine, in_cell[in_cell["teacher"] == teacher],
                           probe_set, own.get((cell[0], teacher)))
                for teacher, mine in group.groupby("teacher", sort=False)]
        parts.append(_ranked(pd.DataFrame(rows)))
    table = pd.concat(parts, ignore_index=True).sort_values(["benchmark", "student", "memory", "probe_rank"],
                                                           kind="stable")
    table.attrs["notes"] = [PROBE_NOTE, CORRELATION_NOTE]
    return table.reset_index(drop=True)


def _probe_row(cell: dict, teacher: str, probes: pd.DataFrame, grid: pd.DataFrame, probe_set, own) -> dict:
    """`own`: the teacher's run (a row of the runs frame), or None."""
    held_out = [{task: solved for task, solved in row.success_by_task.items() if task not in probe_set}
                for row in grid.itertuples()]
    held_out = [verdicts for verdicts in held_out if verdicts]
    return {"benchmark": cell["benchmark"], "student": cell["student"], "memory": cell["memcfg"],
            "protocol": cell["protocol"], "k": cell["k_text"],
            "bank": f"{cell['writer']}-{cell['embedder']}{cell['build']}", "teacher": teacher,
            "probe_tasks": len(probe_set), "probe_success": probes["success_rate"].mean(),
            **interval_columns("probe_success", probes["successes"].sum(), probes["n_tasks"].sum()),
            "probe_strict": probes["strict_rate"].mean(),
            "grid_runs": len(held_out), "grid_tasks": max((len(v) for v in held_out), default=0),
            "grid_success": (sum(100.0 * sum(v.values()) / len(v) for v in held_out) / len(held_out)
                             if held_out else None),
            **interval_columns("grid_success", sum(sum(v.values()) for v in held_out),
                               sum(len(v) for v in held_out)),
            "teacher_success": None if own is None else own.success_rate,
            **interval_columns("teacher_success", *((0, 0) if own is None else (own.successes, own.n_tasks)))}


def _ranked(table: pd.DataFrame) -> pd.DataFrame:
    """One cell's teachers ranked by probe and by grid, with the rank correlations over those that have both."""
    from scipy.stats import kendalltau, spearmanr

    table["probe_rank"] = table["probe_success"].rank(ascending=False, method="min").astype(int)
    table["grid_rank"] = table["grid_success"].rank(ascending=False, method="min").astype("Int64")
    both = table.dropna(subset=["grid_success"])
    varied = len(both) >= 2 and both["probe_success"].nunique() > 1 and both["grid_success"].nunique() > 1
    rho = spearmanr(both["probe_success"], both["grid_success"])[0] if varied else None
    tau, tau_p = kendalltau(both["probe_success"], both["grid_success"]) if varied else (None, None)
    strength = both.dropna(subset=["teacher_success"])
    baseline = (spearmanr(strength["teacher_success"], strength["grid_success"])[0]
                if len(strength) >= 2 and strength["teacher_success"].nunique() > 1
                and strength["grid_success"].nunique() > 1 else None)
    table = table.assign(teachers_compared=len(both), spearman_rho=rho, kendall_tau=tau, kendall_p=tau_p,
                         teacher_success_rho=baseline)
    first = ["benchmark", "student", "memory", "protocol", "k", "bank", "teacher", "probe_tasks", "probe_success",
             *interval_of("probe_success"), "probe_rank", "grid_runs", "grid_tasks", "grid_success",
             *interval_of("grid_success"), "grid_rank"]
    return table[first + [column for column in table.columns if column not in first]]
