"""The paper's tables, computed from run files, with the paper's number beside ours where the cell matches.

Each builder takes the runs frame (amd.analysis.runs.load_runs) and returns a DataFrame; `write_table` saves it
as CSV and as Markdown with its caption and notes. Success rates are percentages, averaged over seeds, each with its
95 % Wilson interval over the cell's task attempts (amd.analysis.stats): separate numeric columns in the CSV, one
"rate [low, high]" column in the Markdown.
"""

from pathlib import Path
from typing import Any

import pandas as pd

from amd.analysis.cells import (
    MEMORY_ORDER,
    SUCCESS,
    aggregate,
    cell_keys,
    cell_success,
    order_by,
    run_success,
    student_runs,
    teacher_models,
)
from amd.analysis.reference import CITATION, SETTING_NOTE, load_reference, setting
from amd.analysis.retrieval import TABLE_NOTE as RETRIEVAL_NOTE
from amd.analysis.retrieval import TEXT_NOTE, no_entry_text
from amd.analysis.retrieval import summary as retrieval_summary
from amd.analysis.runs import restrict_to_tasks
from amd.analysis.stats import INTERVAL_NOTE, PASS_K_NOTE, STD_NOTE, interval_of, pass_hat_k
from amd.benchmarks.base import STRICT_RULE
from amd.core.errors import AmdError
from amd.core.vocabulary import (
    CROSS_SPLITS,
    ZERO_SHOT,
    memory_config,
    method_spec,
    method_specs,
    proposed_config,
)

STRICT_NOTE = (f"success: the benchmark's own verdict (the paper's; the `paper` columns stand beside it); {STRICT_RULE}, "
               "the same runs (amd.benchmarks.base.strict_success).")
BASELINE_NOTE = "Baselines are built from the same teacher trajectories as AMD, successes and failures alike."
PROTOCOL_NOTE = ("protocol: the run's leakage protocol (self_excluded: no task retrieves memory from its own group; "
                 "self_excluded_task: only its own memory is hidden, as in the paper; cross_split, cross_split_task: "
                 "memory from 70 % of the groups or tasks, scored on the rest; shared: the paper's main setting, a "
                 "task may retrieve its own memory); a dash: no memory.")
AVG = "avg"  # Table 1's Avg: the mean over its benchmarks
NO_ENTRY = "no entry ≥ δ (%)"  # per memory type, the share of retrieval queries that δ left with none
RETRIEVAL_COLUMNS = ["benchmark", "student", "memory", "protocol", "setting", "teacher", "k", "type", "delta",
                     "queries", "no_entry", "no_entry_%", "missed_best", "injected", "injected_median",
                     "injected_min", "injected_max", "runs"]
NOT_IN_THE_PAPER_TEXT = ("The paper's {table} numbers are not in the text of arXiv 2608.07169 this was read from "
                         "(its caption only{said}), so no paper column.")
COST_NOTE = ("tokens, cost_usd: per run (mean over seeds), every role counted: the agent, the student calls of its "
             "memory method, a user simulator and the writer that built its bank (the whole build, in every run "
             "that reads it); US dollars from data/prices.csv, 0 for models served here (local:, vllm:); a dash: "
             "unknown (`amd score` says why).")

CAPTIONS = {
    "table1_main": "Table 1: success rate (%) of the teacher, and of each student zero-shot, with each baseline "
    "memory method and with {method} memory ({config}); delta = the row - the student's zero-shot; benchmark avg = "
    "the mean over the benchmarks (the paper's Avg column; a mean of rates, so no interval).",
    "table2_ablation": "Table 2: ablation of memory components (WF workflow, ST subtask, FN function); "
    "student_memory = the student's own trajectories as the memory source.",
    "table3_teacher": "Table 3: effect of the teacher: the teacher's own success rate and the students' with its memory "
    "(writer: who wrote that memory).",
    "table5_repeats": "Table 5: success rate (%) over repeated runs, mean ± standard deviation.",
    "table6_protocols": "Table 6: disjoint-evaluation protocols. cross_split_task (cross_split): memory from 70 % "
    "of the tasks (of the groups), scored on the other 30 % (zero-shot scored on the same 30 %); self_excluded_task "
    "(self_excluded): no task retrieves its own memory (its own group's).",
}


def table1_memories() -> list[str]:
    """The student rows of Table 1: zero-shot, the Table 1 configs of the other memory methods (the paper's
    baselines; a method's spec may keep its configs out), then the paper's method's (its spec: `proposed`)."""
    specs = method_specs()
    ordered = [spec for spec in specs if not spec.proposed] + [spec for spec in specs if spec.proposed]
    return [ZERO_SHOT, *(name for spec in ordered for name in spec.table1_configs())]


def table1_main(runs: pd.DataFrame) -> pd.DataFrame:
    """A row per benchmark and agent and memory: the teacher, then each student zero-shot, with each baseline
    method and with AMD; delta = the row's success - the student's zero-shot success; then the Avg rows."""
    reference, models = load_reference(), teacher_models(runs)
    students = student_runs(runs)
    cells = aggregate(students[students["memory"].isin(table1_memories())],
                      ["benchmark", "student", "memory", "protocol", "teacher"])
    cells = order_by(order_by(cells, "memory", table1_memories()), "student", list(dict.fromkeys(cells["student"])))
    zero_shot = {(row.benchmark, row.student): row.success for row in cells.itertuples() if row.memory == ZERO_SHOT}
    rows = [_teacher_row("table1_main", teacher, reference) for _, teacher in runs[runs["role"] == "teacher"].iterrows()]
    for row in cells.itertuples():
        zero = zero_shot.get((row.benchmark, row.student))
        rows.append({
            "benchmark": row.benchmark, "agent": row.student, "role": "student", "memory": row.memory,
            "protocol": row.protocol, "setting": setting("table1_main", row.protocol, row.temperature, row.variant),
            **cell_success(row), "delta": None if row.memory == ZERO_SHOT or zero is None else row.success - zero,
            "runs": row.runs, "tasks": row.tasks, NO_ENTRY: no_entry_text(row.retrieval), "tokens": row.tokens,
            "cost_usd": row.cost_usd, "paper": paper_value(reference, "table1_main", row, row.memory, models),
        })
    table = pd.DataFrame(rows)
    table = order_by(table, "benchmark", list(dict.fromkeys(table["benchmark"]))).reset_index(drop=True)
    table = pd.concat([table, pd.DataFrame(average_rows(table), columns=table.columns)], ignore_index=True)
    table.attrs["notes"] = [*reconstruction_notes(table), TEXT_NOTE]
    return table


def paper_value(reference, table: str, row, memory: str | None, models: dict) -> float | None:
    """The paper's number beside an aggregated cell (model, teacher, tasks, protocol, temperature) where it is in the
    paper's setting; `models`: our teachers' models by name (cells.teacher_models)."""
    teacher = models.get(row.teacher) if isinstance(row.teacher, str) else None
    return reference.value(table, row.benchmark, row.model, memory, tasks=row.tasks, teacher=teacher,
                           protocol=row.protocol, temperature=row.temperature, variant=getattr(row, "variant", None))


def _teacher_row(table: str, teacher: pd.Series, reference) -> dict:
    return {"benchmark": teacher["benchmark"], "agent": teacher["teacher"], "role": "teacher", "memory": "teacher",
            "protocol": None, "setting": setting(table, None, teacher["temperature"]),
            **run_success(teacher), "delta": None, "runs": 1, "tasks": teacher["n_tasks"],
            "tokens": teacher["tokens"], "cost_usd": teacher["cost_usd"],
            "paper": reference.value(table, teacher["benchmark"], teacher["model"], "teacher",
                                     tasks=teacher["n_tasks"], temperature=teacher["temperature"])}


def average_rows(table: pd.DataFrame) -> list[dict]:
    """Per agent, memory, protocol and setting with a row on every benchmark of the table: the mean success and
    delta over them (the paper's Avg column is that plain mean: §4.2 gives 38.39, 40.96 and 40.63, the means of its
    three columns), and the mean of the paper's numbers where each benchmark has one."""
    benchmarks = set(table["benchmark"])
    if len(benchmarks) < 2:
        return []
    keys = ["agent", "role", "memory", "protocol", "setting"]
    rows = []
    for names, group in table.groupby(keys, dropna=False, sort=False):
        if set(group["benchmark"]) != benchmarks or len(group) != len(benchmarks):
            continue
        rows.append({**dict(zip(keys, names)), "benchmark": AVG, "success": group["success"].mean(),
                     "strict": group["strict"].mean(),
                     "delta": _mean_of_all(group["delta"]), "runs": None, "tasks": None, "tokens": None,
                     "cost_usd": None, "paper": _mean_of_all(group["paper"])})
    return rows


def _mean_of_all(values: pd.Series) -> float | None:
    return None if values.isna().any() else float(values.mean())


def reconstruction_notes(table: pd.DataFrame) -> list[str]:
    """Which baseline rows are reconstructions, from the methods' specs (`reconstructed`, and `released_for`: the
    benchmarks whose code of the method the AMD authors released)."""
    notes = []
    for memory in dict.fromkeys(table["memory"]):
        if memory in ("teacher", ZERO_SHOT):
            continue
        method = memory_config(memory).method
        if method is None:
            continue
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
    table["setting"] = settings_of("table2_ablation", table)
    table["paper"] = [paper_value(reference, "table2_ablation", row, row.memory, models) for row in table.itertuples()]
    table[NO_ENTRY] = [no_entry_text(stats) for stats in table["retrieval"]]
    table = order_by(table, "memory", MEMORY_ORDER)
    table = table.sort_values(["benchmark", "student"], kind="stable")[
        ["benchmark", "student", "memory", "protocol", "setting", "teacher", *SUCCESS, "std", "runs", "tasks",
         NO_ENTRY, "tokens", "cost_usd", "paper"]]
    table.attrs["notes"] = [TEXT_NOTE]
    return table


def settings_of(table_name: str, table: pd.DataFrame) -> list[str]:
    """The setting of each aggregated row (amd.analysis.reference.setting)."""
    return [setting(table_name, row.protocol, row.temperature, getattr(row, "variant", None))
            for row in table.itertuples()]


def table3_teacher(runs: pd.DataFrame) -> pd.DataFrame:
    reference, models = load_reference(), teacher_models(runs)
    rows = []
    for _, teacher in runs[runs["role"] == "teacher"].iterrows():
        row = _teacher_row("table3_teacher", teacher, reference)
        rows.append({key: row[key] for key in ("benchmark", "setting", *SUCCESS, "runs", "tasks", "tokens", "cost_usd",
                                               "paper")} | {"teacher": teacher["teacher"], "acting": "teacher itself"})
    students, proposed = student_runs(runs), proposed_config()
    cells = aggregate(students[students["memory"] == proposed],
                      ["benchmark", "teacher", "writer", "student", "protocol"])
    for row in cells.itertuples():
        rows.append({"benchmark": row.benchmark, "teacher": row.teacher, "writer": row.writer, "acting": row.student,
                     "protocol": row.protocol,
                     "setting": setting("table3_teacher", row.protocol, row.temperature, row.variant),
                     **cell_success(row), "runs": row.runs, "tasks": row.tasks, "tokens": row.tokens,
                     "cost_usd": row.cost_usd, "paper": paper_value(reference, "table3_teacher", row, proposed, models)})
    if not rows:
        raise AmdError("table3_teacher: no teacher or student runs among --runs")
    columns = ["benchmark", "teacher", "writer", "acting", "protocol", "setting", *SUCCESS, "runs", "tasks",
               "tokens", "cost_usd", "paper"]
    return pd.DataFrame(rows, columns=columns).sort_values(["benchmark", "teacher"], kind="stable")


def table5_repeats(runs: pd.DataFrame) -> pd.DataFrame:
    keys = ["benchmark", "student", "memory", "protocol"]
    students = student_runs(runs)
    table = aggregate(students, keys)
    table["setting"] = settings_of("table5_repeats", table)
    table["mean ± std"] = [f"{row.success:.2f} ± " + (f"{row.std:.2f}" if row.runs >= 2 else "—")
                           for row in table.itertuples()]
    repeats = list(range(2, int(table["runs"].max()) + 1))
    verdicts = [_verdicts_by_task(cell) for _, cell in students.groupby(cell_keys(students, keys), dropna=False,
                                                                         sort=False)]  # as aggregate
    for k in repeats:
        table[f"pass^{k}"] = [pass_hat_k(by_task, k) for by_task in verdicts]
    table = order_by(table, "memory", MEMORY_ORDER)
    table = table.sort_values(["benchmark", "student"], kind="stable")[
        [*keys, "setting", "mean ± std", *SUCCESS, "std", *(f"pass^{k}" for k in repeats), "runs", "tasks",
         "tokens", "cost_usd"]]
    table.attrs["notes"] = [NOT_IN_THE_PAPER_TEXT.format(
        table="Table 5", said="; §B.4 says every standard deviation is below one percentage point")]
    table.attrs["notes"] += [PASS_K_NOTE] if repeats else []
    return table


def _verdicts_by_task(cell: pd.DataFrame) -> dict:
    """Each task's verdicts over the cell's runs (seeds)."""
    verdicts: dict[str, Any] = {}
    for by_task in cell["success_by_task"]:
        for task, solved in by_task.items():
            verdicts.setdefault(task, []).append(bool(solved))
    return verdicts


def table6_protocols(runs: pd.DataFrame) -> pd.DataFrame:
    students = student_runs(runs)
    memory_runs = students[students["role"] != "zero_shot"]
    zero_shot = students[students["role"] == "zero_shot"]
    parts = [memory_runs]
    for protocol, group in memory_runs.groupby("protocol"):
        for (benchmark, student), cell in group.groupby(["benchmark", "student"]):
            evaluated = frozenset().union(*cell["task_ids"])
            mine = zero_shot[(zero_shot["benchmark"] == benchmark) & (zero_shot["student"] == student)]
            if protocol in CROSS_SPLITS:
                mine = mine.apply(restrict_to_tasks, axis=1, task_ids=evaluated) if len(mine) else mine
            parts.append(mine.assign(protocol=protocol))
    table = aggregate(pd.concat(parts), ["benchmark", "student", "protocol", "memory"])
    table["setting"] = settings_of("table6_protocols", table)
    table = order_by(table, "memory", MEMORY_ORDER)
    table = table.sort_values(["benchmark", "student", "protocol"], kind="stable")[
        ["benchmark", "student", "protocol", "setting", "memory", *SUCCESS, "std", "runs", "tasks", "tokens",
         "cost_usd"]]
    table.attrs["notes"] = [NOT_IN_THE_PAPER_TEXT.format(
        table="Table 6", said="; §B.3 describes them in words only")]
    return table


def retrieval_delta(runs: pd.DataFrame) -> pd.DataFrame:
    """What retrieval saw (δ's grip on memory), per memory run cell and memory type: the share of retrieval queries
    that found no entry at or above the minimum similarity δ, and the similarities of what was injected."""
    students = student_runs(runs)
    memory = students[students["role"] != "zero_shot"]
    if memory.empty:
        raise AmdError("retrieval_delta: no memory runs among --runs")
    cells = aggregate(memory, ["benchmark", "student", "memory", "protocol", "teacher", "k_text"])
    rows = [{"benchmark": cell.benchmark, "student": cell.student, "memory": cell.memory, "protocol": cell.protocol,
             "setting": setting("retrieval_delta", cell.protocol, cell.temperature, cell.variant), "teacher": cell.teacher,
             "k": cell.k_text, "type": type_name, **retrieval_summary(item), "runs": cell.runs}
            for cell in order_by(cells, "memory", MEMORY_ORDER).itertuples()
            for type_name, item in cell.retrieval.items()]
    table = pd.DataFrame(rows, columns=RETRIEVAL_COLUMNS)
    table.attrs["notes"] = [RETRIEVAL_NOTE]
    return table


def build_table(name: str, runs: pd.DataFrame) -> pd.DataFrame:
    """The registered table `name` (amd.core.registry OUTPUTS) computed from the runs frame."""
    from amd.core.registry import OUTPUTS

    return OUTPUTS.load(name)(runs)


def caption(name: str) -> str:
    """The table's caption: the paper's tables have one here; a plug-in table's docstring gives its own (its first
    paragraph)."""
    from amd.core.registry import OUTPUTS

    if name in CAPTIONS:
        proposed = proposed_config()
        method = memory_config(proposed).method if proposed else None
        return CAPTIONS[name].format(method=method_spec(method).title if method else "no", config=proposed)
    return " ".join((OUTPUTS.load(name).__doc__ or name).strip().split("\n\n")[0].split())


def write_table(name: str, table: pd.DataFrame, csv_path, md_path, note: str = "") -> None:
    """CSV for machines (each interval in its own numeric columns); Markdown with caption, each rate and its interval
    in one column, paper citation and the config's note for people."""
    rounded = table.infer_objects().round(2)  # rows built as dicts hold None beside floats: numbers again
    rounded.to_csv(csv_path, index=False)
    shown, rates = rates_as_text(rounded.astype(object).where(rounded.notna(), None))
    lines = [f"**{caption(name)}**", "", shown.to_markdown(index=False, floatfmt=".2f", missingval="—"), ""]
    if any(column.startswith("paper") for column in table.columns):
        lines.append(f"`paper*` columns: {CITATION} A dash marks a cell the paper does not report.")
    lines += [f"Note: {line}" for line in table.attrs.get("notes", [])]
    if rates:
        lines.append(f"Note: {INTERVAL_NOTE}")
    if any("strict" in str(column) for column in table.columns) or "verdict" in table.columns:
        lines.append(f"Note: {STRICT_NOTE}")
    if "std" in table.columns:
        lines.append(f"Note: {STD_NOTE}")
    if "protocol" in table.columns:
        lines.append(f"Note: {PROTOCOL_NOTE}")
    if "setting" in table.columns:
        lines.append(f"Note: {SETTING_NOTE}")
    if "cost_usd" in table.columns:
        lines.append(f"Note: {COST_NOTE}")
    if note:
        lines.append(f"Note: {note}")
    Path(md_path).write_text("\n".join(lines) + "\n", encoding="utf-8")


def rates_as_text(table: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Each rate that has interval columns (amd.analysis.stats.interval_of) as one column "RATE [95 % CI]" of
    "38.46 [17.71, 64.48]", its attempt count as a whole number; and the names of those rates."""
    rates = [column for column in table.columns if interval_of(column)[0] in table.columns]
    for rate in rates:
        low, high, n = interval_of(rate)
        table[rate] = [None if value is None else f"{value:.2f}" + ("" if lo is None else f" [{lo:.2f}, {hi:.2f}]")
                       for value, lo, hi in zip(table[rate], table[low], table[high])]
        table[n] = [None if count is None else int(count) for count in table[n]]
        table = table.drop(columns=[low, high]).rename(columns={rate: f"{rate} [95 % CI]"})
    return table, rates
