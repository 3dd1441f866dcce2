"""AMD's own tables (its spec's `tables`), beside the paper's (amd.analysis.tables): Table 4 (the representation
per memory type) and its config variants against their plain config, in the same cell and seed: checked
decomposition, gated and compressed function memory, online memory. `detail_columns` gives the runs frame what its
variants record beside their injections."""

import json

import pandas as pd

from amd.analysis.cells import SUCCESS, aggregate, student_runs, teacher_models
from amd.analysis.paired import paired_as, variant_cell, variant_runs
from amd.analysis.reference import load_reference
from amd.analysis.tables import paper_value, settings_of
from amd.core.vocabulary import memory_config
from amd.methods.amd.render import parse_representation


def detail_columns(records: list[dict]) -> dict:
    """Per task whether a checked decomposition differs from the single-shot one; function hints given and
    withheld by the gate, counted per (error step, function)."""
    steps = [step for record in records for turn in record["turns"] for step in turn["steps"]]
    return {
        "decomposition_differs_by_task": {r["task_id"]: r["memory_details"]["decomposition"]["differs"]
                                          for r in records if "decomposition" in r.get("memory_details", {})},
        "function_hints": sum(len({e.get("query") for e in step.get("injected_memory", []) if e["type"] == "function"})
                              for step in steps),
        "function_hints_withheld": sum(len(step.get("memory_details", {}).get("fn_gate", {}).get("withheld", []))
                                       for step in steps),
    }


def table4_representation(runs: pd.DataFrame) -> pd.DataFrame:
    """Table 4: memory representation (prose or code) per memory type."""
    reference = load_reference()
    students = student_runs(runs)
    table = aggregate(students[(students["role"] == "memory") & students["representation"].notna()],
                      ["benchmark", "student", "representation", "memory", "protocol", "teacher"])
    table["setting"] = settings_of("table4_representation", table)
    models = teacher_models(runs)
    table["paper"] = [paper_value(reference, "table4_representation", row, row.representation, models)
                      for row in table.itertuples()]
    return table[["benchmark", "student", "representation", "memory", "protocol", "setting", *SUCCESS, "std", "runs",
                  "tasks", "tokens", "cost_usd", "paper"]]


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
    for variant, single in variant_runs(runs, DECOMPOSITION_OPTIONS, "decomposition_check"):
        differs = [task for task, differ in variant.decomposition_differs_by_task.items() if differ]
        samples = int(dict(memory_config(variant.memcfg).options)["decompose_samples"])
        rows.append({**variant_cell(variant), "samples": samples,
                     "differ": len(differs), "differ_%": 100.0 * len(differs) / max(variant.n_tasks, 1),
                     "single_shot_on_differ": sum(single.success_by_task.get(task, False) for task in differs),
                     "checked_on_differ": sum(variant.success_by_task.get(task, False) for task in differs),
                     **paired_as(single, variant, "single_shot", "checked")})
    table = pd.DataFrame(rows)
    table.attrs["notes"] = [DECOMPOSITION_NOTE]
    return table


def function_gating(runs: pd.DataFrame) -> pd.DataFrame:
    """Gated and compressed function memory (beyond the paper): each variant against always-on function memory
    (wf_st_fn) in the same cell and seed: hints given and withheld per task, prompt tokens per task, and the tasks
    solved by each (paired, sign test)."""
    rows = []
    for variant, always in variant_runs(runs, FUNCTION_OPTIONS, "function_gating"):
        options = dict(memory_config(variant.memcfg).options)
        rows.append({**variant_cell(variant), "fn_gate": options.get("fn_gate", "always"),
                     "fn_form": parse_representation(options.get("representation", "")).get("function", "bank"),
                     "hints_per_task_always_on": always.function_hints / max(always.n_tasks, 1),
                     "hints_per_task": variant.function_hints / max(variant.n_tasks, 1),
                     "withheld_per_task": variant.function_hints_withheld / max(variant.n_tasks, 1),
                     "prompt_tokens_per_task_always_on": always.prompt_tokens / max(always.n_tasks, 1),
                     "prompt_tokens_per_task": variant.prompt_tokens / max(variant.n_tasks, 1),
                     **paired_as(always, variant, "always_on", "variant")})
    table = pd.DataFrame(rows)
    table.attrs["notes"] = [FUNCTION_NOTE]
    return table


def online_vs_frozen(runs: pd.DataFrame) -> pd.DataFrame:
    """Online memory vs the same memory frozen (beyond the paper): each online run paired per task with the frozen
    run of the same cell and seed; columns as in paired_tasks, named frozen and online, plus what the online run
    added to its bank (from its history): entries added, near-duplicates dropped, tasks that retrieved an added
    entry."""
    rows = []
    for online, frozen in variant_runs(runs, {"online"}, "online_vs_frozen"):
        rows.append({**variant_cell(online), "k": online.k_text,
                     **paired_as(frozen, online, "frozen", "online"),
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
    added: set[str]
    added, using = set(), 0
    for event in events:
        using += bool(added & set(event["retrieved"]))
        added |= {entry["id"] for entry in event["added"]}
    return {"entries_added": len(added), "duplicates_dropped": sum(d["dropped"] for e in events for d in e["dedup"]),
            "tasks_using_added": using}

