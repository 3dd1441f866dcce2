"""The paper's tables, computed from run files, with the paper's number beside ours where the cell matches.

Each builder takes the runs frame (amd.analysis.runs.load_runs) and returns a DataFrame; `write_table` saves it
as CSV and as Markdown with its caption and notes. Success rates are percentages, averaged over seeds.
"""

import json
from pathlib import Path

import pandas as pd

from amd.analysis.reference import CITATION, load_reference
from amd.analysis.runs import restrict_to_tasks
from amd.errors import AmdError
from amd.memory.amd.render import parse_representation
from amd.vocabulary import AMD_FULL, ZERO_SHOT, memory_config, memory_configs, plain_config

AMD_CONFIG = AMD_FULL
MEMORY_ORDER = [*memory_configs(), "student_memory"]
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
    "memory method and with AMD memory (wf_st_fn); delta = the row - the student's zero-shot.",
    "table2_ablation": "Table 2: ablation of memory components (WF workflow, ST subtask, FN function); "
    "student_memory = the student's own trajectories as the memory source.",
    "table3_teacher": "Table 3: effect of the teacher: the teacher's own success rate and the students' with its memory "
    "(writer: who wrote that memory).",
    "table4_representation": "Table 4: memory representation (prose or code) per memory type.",
    "table5_repeats": "Table 5: success rate (%) over repeated runs, mean ± standard deviation.",
    "table6_protocols": "Table 6: disjoint-evaluation protocols. cross_split: memory from 70 % of tasks, scored on "
    "the other 30 % (zero-shot scored on the same 30 %); self_excluded: no task retrieves its own memory.",
}


def _teacher_models(runs: pd.DataFrame) -> dict:
    teachers = runs[runs["role"] == "teacher"]
    return dict(zip(teachers["teacher"], teachers["model"]))


def _memory_label(row) -> str:
    if row["role"] == "memory" and row["teacher"] == row["student"]:
        return "student_memory"
    return row["memcfg"]


def aggregate(runs: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Mean over seeds (and std, run count) of each cell named by `keys`."""
    grouped = runs.groupby(keys, dropna=False, sort=False)
    table = grouped.agg(
        model=("model", "first"),
        success=("success_rate", "mean"),
        std=("success_rate", "std"),
        runs=("success_rate", "size"),
        tasks=("n_tasks", "max"),
        mean_steps=("mean_steps", "mean"),
        tokens=("tokens", "mean"),
        cost_usd=("cost_usd", lambda costs: pd.to_numeric(costs).mean(skipna=False)),  # unknown stays unknown
    ).reset_index()
    table["std"] = table["std"].fillna(0.0)
    return table


def _students(runs: pd.DataFrame) -> pd.DataFrame:
    students = runs[runs["role"].isin(["zero_shot", "memory", "other"])].copy()
    if students.empty:
        raise AmdError("no student runs among --runs")
    students["memory"] = students.apply(_memory_label, axis=1)
    students["student"] = students["student"].fillna(students["model"])
    return students


def _order(table: pd.DataFrame, column: str, order: list) -> pd.DataFrame:
    rank = {name: i for i, name in enumerate(order)}
    return table.sort_values(column, key=lambda s: s.map(lambda v: rank.get(v, len(rank))), kind="stable")


def table1_memories() -> list[str]:
    """The student rows of Table 1: zero-shot, every config of the other memory methods (the paper's baselines),
    then AMD's full config."""
    amd_method = memory_config(AMD_CONFIG).method
    others = [name for name, config in memory_configs().items() if config.method not in (None, amd_method)]
    return [ZERO_SHOT, *others, AMD_CONFIG]


def table1_main(runs: pd.DataFrame) -> pd.DataFrame:
    """A row per benchmark and agent and memory: the teacher, then each student zero-shot, with each baseline
    method and with AMD; delta = the row's success - the student's zero-shot success."""
    reference, teacher_models = load_reference(), _teacher_models(runs)
    students = _students(runs)
    cells = aggregate(students[students["memory"].isin(table1_memories())],
                      ["benchmark", "student", "memory", "protocol", "teacher"])
    cells = _order(_order(cells, "memory", table1_memories()), "student", list(dict.fromkeys(cells["student"])))
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
                                     None if row.memory == ZERO_SHOT else teacher_models.get(row.teacher),
                                     row.protocol),
        })
    table = pd.DataFrame(rows)
    table = _order(table, "benchmark", list(dict.fromkeys(table["benchmark"]))).reset_index(drop=True)
    table.attrs["notes"] = reconstruction_notes(table)
    return table


def _teacher_row(teacher: pd.Series, reference) -> dict:
    return {"benchmark": teacher["benchmark"], "agent": teacher["teacher"], "role": "teacher", "memory": "teacher",
            "protocol": None, "success": teacher["success_rate"], "delta": None, "runs": 1, "tasks": teacher["n_tasks"],
            "tokens": teacher["tokens"], "cost_usd": teacher["cost_usd"],
            "paper": reference.value("table1_main", teacher["benchmark"], teacher["model"], "teacher")}


def reconstruction_notes(table: pd.DataFrame) -> list[str]:
    """Which baseline rows are reconstructions, from the methods' registry entries (`reconstructed`, and
    `released_for`: the benchmarks whose code of the method the AMD authors released)."""
    from amd.registry import MEMORY_METHODS

    notes = []
    for memory in dict.fromkeys(table["memory"]):
        if memory in ("teacher", ZERO_SHOT, AMD_CONFIG):
            continue
        method = memory_config(memory).method
        meta = MEMORY_METHODS.entry(method).meta
        if "reconstructed" not in meta:
            continue
        benchmarks = dict.fromkeys(table.loc[table["memory"] == memory, "benchmark"])
        elsewhere = [name for name in benchmarks if name not in meta.get("released_for", ())]
        note = f"{memory}: {meta['reconstructed']}"
        if elsewhere:
            note += (f"; on {', '.join(elsewhere)} a reconstruction (the AMD authors' release holds no {method} code "
                     "for it)")
        notes.append(note + ".")
    if notes:
        notes.append(BASELINE_NOTE)
    return notes


def table2_ablation(runs: pd.DataFrame) -> pd.DataFrame:
    reference, teacher_models = load_reference(), _teacher_models(runs)
    students = _students(runs)
    table = aggregate(students, ["benchmark", "student", "memory", "protocol", "teacher"])
    table["paper"] = [
        reference.value("table2_ablation", row.benchmark, row.model, row.memory,
                        None if row.memory == "student_memory" else teacher_models.get(row.teacher), row.protocol)
        for row in table.itertuples()
    ]
    table = _order(table, "memory", MEMORY_ORDER)
    return table.sort_values(["benchmark", "student"], kind="stable")[
        ["benchmark", "student", "memory", "protocol", "teacher", "success", "std", "runs", "tasks", "tokens",
         "cost_usd", "paper"]]


def table3_teacher(runs: pd.DataFrame) -> pd.DataFrame:
    reference, teacher_models = load_reference(), _teacher_models(runs)
    rows = []
    for _, teacher in runs[runs["role"] == "teacher"].iterrows():
        rows.append({"benchmark": teacher["benchmark"], "teacher": teacher["teacher"], "acting": "teacher itself",
                     "success": teacher["success_rate"], "runs": 1, "tasks": teacher["n_tasks"],
                     "tokens": teacher["tokens"], "cost_usd": teacher["cost_usd"],
                     "paper": reference.value("table3_teacher", teacher["benchmark"], teacher["model"], "teacher")})
    students = _students(runs)
    cells = aggregate(students[students["memory"] == AMD_CONFIG],
                      ["benchmark", "teacher", "writer", "student", "protocol"])
    for row in cells.itertuples():
        rows.append({"benchmark": row.benchmark, "teacher": row.teacher, "writer": row.writer, "acting": row.student,
                     "protocol": row.protocol, "success": row.success, "runs": row.runs, "tasks": row.tasks,
                     "tokens": row.tokens, "cost_usd": row.cost_usd,
                     "paper": reference.value("table3_teacher", row.benchmark, row.model, AMD_CONFIG,
                                              teacher_models.get(row.teacher), row.protocol)})
    if not rows:
        raise AmdError("table3_teacher: no teacher or student runs among --runs")
    return pd.DataFrame(rows).sort_values(["benchmark", "teacher"], kind="stable")


def table4_representation(runs: pd.DataFrame) -> pd.DataFrame:
    reference = load_reference()
    students = _students(runs)
    table = aggregate(students[students["role"] == "memory"],
                      ["benchmark", "student", "representation", "memory", "protocol"])
    table["paper"] = [reference.value("table4_representation", row.benchmark, row.model, row.representation,
                                      protocol=row.protocol) for row in table.itertuples()]
    return table[["benchmark", "student", "representation", "memory", "protocol", "success", "std", "runs", "tasks",
                  "tokens", "cost_usd", "paper"]]


def table5_repeats(runs: pd.DataFrame) -> pd.DataFrame:
    table = aggregate(_students(runs), ["benchmark", "student", "memory", "protocol"])
    table["mean ± std"] = [f"{row.success:.2f} ± {row.std:.2f}" for row in table.itertuples()]
    table = _order(table, "memory", MEMORY_ORDER)
    return table.sort_values(["benchmark", "student"], kind="stable")[
        ["benchmark", "student", "memory", "protocol", "mean ± std", "success", "std", "runs", "tasks", "tokens",
         "cost_usd"]]


def table6_protocols(runs: pd.DataFrame) -> pd.DataFrame:
    students = _students(runs)
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
    table = _order(table, "memory", MEMORY_ORDER)
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

    return CAPTIONS.get(name) or " ".join((OUTPUTS.load(name).__doc__ or name).strip().split("\n\n")[0].split())


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
               for row in _students(attacked).itertuples()}
    table.insert(6, "utility_zero_shot_%", [utility[(r.benchmark, r.student, r.seed, "zero_shot")]
                                             for r in table.itertuples()])
    table.insert(7, "utility_with_memory_%", [utility[(r.benchmark, r.student, r.seed, r.memory)]
                                               for r in table.itertuples()])
    return table


def _paired_rows(runs: pd.DataFrame, column: str, name: str, verb: str) -> pd.DataFrame:
    """One row per memory run: its per-task verdicts in `column` paired with the zero-shot run of the same student,
    benchmark and seed."""
    students = _students(runs) if len(runs) else runs
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
    return _order(pd.DataFrame(rows), "memory", MEMORY_ORDER)


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
    students = _students(runs)
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


def table_multi_teacher(runs: pd.DataFrame) -> pd.DataFrame:
    """Several teachers (beyond the paper): success with each single teacher's memory and with a bank pooled from several.

    Each teacher's own success first; then per student, memory config and protocol, a row per single teacher's
    bank and per pooled bank (pool: its teachers in priority order; prefer: the preferred teacher; memory_from:
    how many tasks' memory came from each teacher); vs_best_single = the row - the best single teacher's row."""
    teachers = runs[runs["role"] == "teacher"]
    rows = [{"benchmark": t["benchmark"], "acting": "teacher itself", "teacher": t["teacher"],
             "success": t["success_rate"], "runs": 1, "tasks": t["n_tasks"]} for _, t in teachers.iterrows()]
    students = _students(runs)
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
                     "memory_from": row.memory_from, "success": row.success,
                     "vs_best_single": None if single is None else row.success - single, "std": row.std,
                     "runs": row.runs, "tasks": row.tasks})
    table = pd.DataFrame(rows)
    return table.sort_values(["benchmark"], kind="stable")[
        ["benchmark", "acting", "memory", "protocol", "teacher", "pool", "prefer", "memory_from", "success",
         "vs_best_single", "std", "runs", "tasks"]]


def _pool_columns(pool: dict | None) -> dict:
    """A run's pooled bank as text: its teachers in priority order, the preferred one, tasks' memory by teacher."""
    if not pool:
        return {"pool": "—", "prefer": "—", "memory_from": "—"}
    return {"pool": "+".join(pool["teachers"]), "prefer": pool.get("prefer_teacher") or "—",
            "memory_from": ", ".join(f"{name} {count}" for name, count in pool["tasks_by_teacher"].items())}


PROBE_NOTE = ("probe_success: the student's success (%) on the probe set with the teacher's memory (mean over probe "
              "runs); grid_success: the same cell's success in the grid (mean over its seeds) on the tasks outside "
              "the probe set, so the probe's own tasks cannot inflate the correlation; ranks: 1 = best, ties share "
              "the best rank.")
CORRELATION_NOTE = ("spearman_rho, kendall_tau: rank correlation of probe_success and grid_success over the teachers "
                    "that have both (teachers_compared; none below 2 teachers or when one side is constant; kendall_p: "
                    "scipy's two-sided p, which few teachers keep large); "
                    "teacher_success_rho: the same for the teachers' own success, the guess a probe has to beat.")
PROBE_CELL = ["benchmark", "student", "writer", "embedder", "representation", "memcfg", "protocol", "k_text"]


def probe_fit(runs: pd.DataFrame) -> pd.DataFrame:
    """Teacher–student fit probe (beyond the paper): per student, the teachers ranked by a small probe set.

    Each teacher's probe score (the student's success on the probe set with that teacher's memory) and rank; the
    grid's success with the same memory on its tasks outside the probe set, where the grid has run it, and rank;
    the rank correlation of the two over the teachers (Spearman, Kendall; scipy) and, as a baseline, that of the
    teachers' own success rates."""
    probes, grid = runs[runs["role"] == "probe"], runs[runs["role"] == "memory"]
    if probes.empty:
        raise AmdError("probe_fit: no probe runs among --runs (amd probe; experiments with probe: true)")
    own = {(row.benchmark, row.teacher): row.success_rate for row in runs[runs["role"] == "teacher"].itertuples()}
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
    held_out = [{task: solved for task, solved in row.success_by_task.items() if task not in probe_set}
                for row in grid.itertuples()]
    held_out = [verdicts for verdicts in held_out if verdicts]
    return {"benchmark": cell["benchmark"], "student": cell["student"], "memory": cell["memcfg"],
            "protocol": cell["protocol"], "k": cell["k_text"],
            "bank": f"{cell['writer']}-{cell['embedder']}-{cell['representation']}", "teacher": teacher,
            "probe_tasks": len(probe_set), "probe_success": probes["success_rate"].mean(),
            "grid_runs": len(held_out), "grid_tasks": max((len(v) for v in held_out), default=0),
            "grid_success": (sum(100.0 * sum(v.values()) / len(v) for v in held_out) / len(held_out)
                             if held_out else None),
            "teacher_success": own}


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
             "probe_rank", "grid_runs", "grid_tasks", "grid_success", "grid_rank"]
    return table[first + [column for column in table.columns if column not in first]]
