"""The paper's tables, computed from run files, with the paper's number beside ours where the cell matches.

Each builder takes the runs frame (amd.analysis.runs.load_runs) and returns a DataFrame; `write_table` saves it
as CSV and as Markdown with its caption and notes. Success rates are percentages, averaged over seeds.
"""

from pathlib import Path

import pandas as pd

from amd.analysis.cells import MEMORY_ORDER, aggregate, order_by, student_runs, teacher_models
from amd.analysis.reference import CITATION, load_reference
from amd.analysis.runs import restrict_to_tasks
from amd.errors import AmdError
from amd.vocabulary import ZERO_SHOT, memory_config, method_spec, method_specs, proposed_config

BASELINE_NOTE = "Baselines are built from the same teacher trajectories as AMD, successes and failures alike."
PROTOCOL_NOTE = ("protocol: the run's leakage protocol (self_excluded: no task retrieves memory from its own group; "
                 "cross_split: memory from 70 % of the groups, scored on the rest; shared: the paper's setting, a "
                 "task may retrieve its own memory); a dash: no memory. The paper's numbers were measured under "
                 "shared, so they appear only beside shared rows (and zero-shot and teacher rows).")
COST_NOTE = ("tokens, cost_usd: per run (mean over seeds), every role counted: the agent, the student calls of its "
             "memory method, a user simulator and the writer that built its bank (the whole build, in every run "
             "that reads it); US dollars from data/prices.csv, 0 for models served here (local:, vllm:); a dash: "
             "unknown (`amd score` says why).")

CAPTIONS = {
    "table1_main": "Table 1: success rate (%) of the teacher, and of each student zero-shot, with each baseline "
    "memory method and with {method} memory ({config}); delta = the row - the student's zero-shot.",
    "table2_ablation": "Table 2: ablation of memory components (WF workflow, ST subtask, FN function); "
    "student_memory = the student's own trajectories as the memory source.",
    "table3_teacher": "Table 3: effect of the teacher: the teacher's own success rate and the students' with its memory "
    "(writer: who wrote that memory).",
    "table5_repeats": "Table 5: success rate (%) over repeated runs, mean ± standard deviation.",
    "table6_protocols": "Table 6: disjoint-evaluation protocols. cross_split: memory from 70 % of tasks, scored on "
    "the other 30 % (zero-shot scored on the same 30 %); self_excluded: no task retrieves its own memory.",
}


def table1_memories() -> list[str]:
    """The student rows of Table 1: zero-shot, the Table 1 configs of the other memory methods (the paper's
    baselines; a method's spec may keep its configs out), then the paper's method's (its spec: `proposed`)."""
    specs = method_specs()
    ordered = [spec for spec in specs if not spec.proposed] + [spec for spec in specs if spec.proposed]
    return [ZERO_SHOT, *(name for spec in ordered for name in spec.table1_configs())]


def table1_main(runs: pd.DataFrame) -> pd.DataFrame:
    """A row per benchmark and agent and memory: the teacher, then each student zero-shot, with each baseline
    method and with AMD; delta = the row's success - the student's zero-shot success."""
    reference, models = load_reference(), teacher_models(runs)
    students = student_runs(runs)
    cells = aggregate(students[students["memory"].isin(table1_memories())],
                      ["benchmark", "student", "memory", "protocol", "teacher"])
    cells = order_by(order_by(cells, "memory", table1_memories()), "student", list(dict.fromkeys(cells["student"])))
    zero_shot = {(row.benchmark, row.student): row.success for row in cells.itertuples() if row.memory == ZERO_SHOT}
    rows = [_teacher_row(teacher, reference) for _, teacher in runs[runs["role"] == "teacher"].iterrows()]
    for row in cells.itertuples():
        zero = zero_shot.get((row.benchmark, row.student))
        rows.append({
            "benchmark": row.benchmark, "agent": row.student, "role": "student", "memory": row.memory,
            "protocol": row.protocol, "success": row.success,
            "delta": None if row.memory == ZERO_SHOT or zero is None else row.success - zero,
            "runs": row.runs, "tasks": row.tasks, "tokens": row.tokens, "cost_usd": row.cost_usd,
            "paper": reference.value("table1_main", row.benchmark, row.model, row.memory,
                                     None if row.memory == ZERO_SHOT else models.get(row.teacher),
                                     row.protocol),
        })
    table = pd.DataFrame(rows)
    table = order_by(table, "benchmark", list(dict.fromkeys(table["benchmark"]))).reset_index(drop=True)
    table.attrs["notes"] = reconstruction_notes(table)
    return table


def _teacher_row(teacher: pd.Series, reference) -> dict:
    return {"benchmark": teacher["benchmark"], "agent": teacher["teacher"], "role": "teacher", "memory": "teacher",
            "protocol": None, "success": teacher["success_rate"], "delta": None, "runs": 1, "tasks": teacher["n_tasks"],
            "tokens": teacher["tokens"], "cost_usd": teacher["cost_usd"],
            "paper": reference.value("table1_main", teacher["benchmark"], teacher["model"], "teacher")}


def reconstruction_notes(table: pd.DataFrame) -> list[str]:
    """Which baseline rows are reconstructions, from the methods' specs (`reconstructed`, and `released_for`: the
    benchmarks whose code of the method the AMD authors released)."""
    notes = []
    for memory in dict.fromkeys(table["memory"]):
        if memory in ("teacher", ZERO_SHOT):
            continue
        method = memory_config(memory).method
        spec = method_spec(method)
        if spec.reconstructed is None:
            continue
        benchmarks = dict.fromkeys(table.loc[table["memory"] == memory, "benchmark"])
        elsewhere = [name for name in benchmarks if name not in spec.released_for]
        note = f"{memory}: {spec.reconstructed}"
        if elsewhere:
            note += (f"; on {', '.join(elsewhere)} a reconstruction (the AMD authors' release holds no {method} code "
                     "for it)")
        notes.append(note + ".")
    if notes:
        notes.append(BASELINE_NOTE)
    return notes


def table2_ablation(runs: pd.DataFrame) -> pd.DataFrame:
    reference, models = load_reference(), teacher_models(runs)
    students = student_runs(runs)
    table = aggregate(students, ["benchmark", "student", "memory", "protocol", "teacher"])
    table["paper"] = [
        reference.value("table2_ablation", row.benchmark, row.model, row.memory,
                        None if row.memory == "student_memory" else models.get(row.teacher), row.protocol)
        for row in table.itertuples()
    ]
    table = order_by(table, "memory", MEMORY_ORDER)
    return table.sort_values(["benchmark", "student"], kind="stable")[
        ["benchmark", "student", "memory", "protocol", "teacher", "success", "std", "runs", "tasks", "tokens",
         "cost_usd", "paper"]]


def table3_teacher(runs: pd.DataFrame) -> pd.DataFrame:
    reference, models = load_reference(), teacher_models(runs)
    rows = []
    for _, teacher in runs[runs["role"] == "teacher"].iterrows():
        rows.append({"benchmark": teacher["benchmark"], "teacher": teacher["teacher"], "acting": "teacher itself",
                     "success": teacher["success_rate"], "runs": 1, "tasks": teacher["n_tasks"],
                     "tokens": teacher["tokens"], "cost_usd": teacher["cost_usd"],
                     "paper": reference.value("table3_teacher", teacher["benchmark"], teacher["model"], "teacher")})
    students, proposed = student_runs(runs), proposed_config()
    cells = aggregate(students[students["memory"] == proposed],
                      ["benchmark", "teacher", "writer", "student", "protocol"])
    for row in cells.itertuples():
        rows.append({"benchmark": row.benchmark, "teacher": row.teacher, "writer": row.writer, "acting": row.student,
                     "protocol": row.protocol, "success": row.success, "runs": row.runs, "tasks": row.tasks,
                     "tokens": row.tokens, "cost_usd": row.cost_usd,
                     "paper": reference.value("table3_teacher", row.benchmark, row.model, proposed,
                                              models.get(row.teacher), row.protocol)})
    if not rows:
        raise AmdError("table3_teacher: no teacher or student runs among --runs")
    return pd.DataFrame(rows).sort_values(["benchmark", "teacher"], kind="stable")


def table5_repeats(runs: pd.DataFrame) -> pd.DataFrame:
    table = aggregate(student_runs(runs), ["benchmark", "student", "memory", "protocol"])
    table["mean ± std"] = [f"{row.success:.2f} ± {row.std:.2f}" for row in table.itertuples()]
    table = order_by(table, "memory", MEMORY_ORDER)
    return table.sort_values(["benchmark", "student"], kind="stable")[
        ["benchmark", "student", "memory", "protocol", "mean ± std", "success", "std", "runs", "tasks", "tokens",
         "cost_usd"]]


def table6_protocols(runs: pd.DataFrame) -> pd.DataFrame:
    students = student_runs(runs)
    memory_runs = students[students["role"] != "zero_shot"]
    zero_shot = students[students["role"] == "zero_shot"]
    parts = [memory_runs]
    for protocol, group in memory_runs.groupby("protocol"):
        for (benchmark, student), cell in group.groupby(["benchmark", "student"]):
            evaluated = frozenset().union(*cell["task_ids"])
            mine = zero_shot[(zero_shot["benchmark"] == benchmark) & (zero_shot["student"] == student)]
            if protocol == "cross_split":
                mine = mine.apply(restrict_to_tasks, axis=1, task_ids=evaluated) if len(mine) else mine
            parts.append(mine.assign(protocol=protocol))
    table = aggregate(pd.concat(parts), ["benchmark", "student", "protocol", "memory"])
    table = order_by(table, "memory", MEMORY_ORDER)
    return table.sort_values(["benchmark", "student", "protocol"], kind="stable")[
        ["benchmark", "student", "protocol", "memory", "success", "std", "runs", "tasks", "tokens", "cost_usd"]]


def build_table(name: str, runs: pd.DataFrame) -> pd.DataFrame:
    """The registered table `name` (amd.registry OUTPUTS) computed from the runs frame."""
    from amd.registry import OUTPUTS

    return OUTPUTS.load(name)(runs)


def caption(name: str) -> str:
    """The table's caption: the paper's tables have one here; a plug-in table's docstring gives its own (its first
    paragraph)."""
    from amd.registry import OUTPUTS

    if name in CAPTIONS:
        proposed = proposed_config()
        return CAPTIONS[name].format(method=method_spec(memory_config(proposed).method).title if proposed else "no",
                                     config=proposed)
    return " ".join((OUTPUTS.load(name).__doc__ or name).strip().split("\n\n")[0].split())


def write_table(name: str, table: pd.DataFrame, csv_path, md_path, note: str = "") -> None:
    """CSV for machines; Markdown with caption, paper citation and the config's note for people."""
    rounded = table.round(2)
    rounded.to_csv(csv_path, index=False)
    shown = rounded.astype(object).where(rounded.notna(), None)
    lines = [f"**{caption(name)}**", "", shown.to_markdown(index=False, floatfmt=".2f", missingval="—"), ""]
    if any(column.startswith("paper") for column in table.columns):
        lines.append(f"`paper*` columns: {CITATION} A dash marks a cell the paper does not report.")
    lines += [f"Note: {line}" for line in table.attrs.get("notes", [])]
    if "protocol" in table.columns:
        lines.append(f"Note: {PROTOCOL_NOTE}")
    if "cost_usd" in table.columns:
        lines.append(f"Note: {COST_NOTE}")
    if note:
        lines.append(f"Note: {note}")
    Path(md_path).write_text("\n".join(lines) + "\n", encoding="utf-8")

