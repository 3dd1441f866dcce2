"""`amd view RUN.jsonl [--against OTHER.jsonl] [--bank BANK] --out RUN.html`: one self-contained HTML page of a run.

Per task: the verdict (status, error, the checker's answer), every step (the model's text, the calls it ran, refused
calls, observations, errors) and the memory injected at task start, per user turn and after an error, each with its
entry id, source task and similarity (and what else its method records, e.g. online memory's flags); with `--bank`,
the entry's own text (from the bank the run read, and for entries the run added to it, from its method). With `--against`, the same tasks of another run (e.g. zero-shot beside
with-memory), the paired counts, and filters for the discordant tasks; without it, a filter for the failed tasks.

The page is made from `templates/view.html` (package data `amd.page_templates`) by Jinja2 with autoescaping, so every
text of a model, a tool or a memory entry is escaped, and its control characters are shown as escapes
(amd.core.text), so no byte of the page is one a terminal or a browser would act on. It loads nothing: style and script are inline, and its
Content-Security-Policy forbids every request and allows only its own style and script, by their sha256.
"""

import base64
import hashlib
import json
from importlib.resources import files
from typing import Any

from amd.benchmarks.base import STRICT_RULE, strict_success
from amd.core.errors import AmdError
from amd.core.files import atomic_file
from amd.core.registry import load_target
from amd.core.schema import read_run
from amd.core.text import printable
from amd.core.trajectory import TrajectoryRecord
from amd.core.vocabulary import ZERO_SHOT, run_method

TEMPLATES = files("amd.page_templates")
SHOWN_ELSEWHERE = ("id", "type", "source_task_id", "source_group", "source_teacher")  # entry fields of the header
# Optional fields of a step and of an injection record (amd/core/trajectory.schema.json), as the page reads them.
STEP_DEFAULTS: dict[str, Any] = {"rejected": [], "code": None, "tokens": None, "cached": False, "model_error": None,
                 "finish_reason": None}
INJECTION_DEFAULTS = {"source_teacher": None, "query": None}
INJECTION_SHOWN = ("type", "entry_id", "source_task_id", "similarity", *INJECTION_DEFAULTS)  # the rest: as key value


def write_view(run_path, out_path, against_path=None, bank_dir=None) -> dict:
    """Render the page to `out_path` (atomically); returns the page's data."""
    page = build_page(run_path, against_path, bank_dir)
    with atomic_file(out_path) as handle:
        handle.write(render(page))
    return page


def build_page(run_path, against_path=None, bank_dir=None) -> dict:
    """What the page shows: the runs, their pairs and per task one column per run (None where a run lacks it)."""
    runs = [_run(run_path, "this run")] + ([_run(against_path, "against")] if against_path else [])
    if len(runs) == 2:
        _check_pairable(*runs)
    if bank_dir:
        _attach_entries(bank_dir, runs)
    columns = sorted(runs, key=lambda run: run["config"] != ZERO_SHOT) if len(runs) == 2 else runs
    order = list(dict.fromkeys(task for run in runs for task in run["records"]))
    tasks = [_task(index, task_id, runs, columns) for index, task_id in enumerate(order)]
    return {"title": f"{runs[0]['config']} on {runs[0]['benchmark']}" + (
                f" beside {runs[1]['config']}" if len(runs) == 2 else ""),
            "runs": [_summary(run) for run in runs], "columns": [_summary(run) for run in columns],
            "strict_rule": STRICT_RULE,
            "paired": _pair_counts(tasks, columns) if len(runs) == 2 else None, "tasks": tasks,
            "bank": str(bank_dir) if bank_dir else None}


def render(page: dict) -> str:
    from jinja2 import Environment, StrictUndefined
    from markupsafe import Markup

    style, script = (TEMPLATES / "view.css").read_text(encoding="utf-8"), (
        TEMPLATES / "view.js").read_text(encoding="utf-8")
    policy = (f"default-src 'none'; style-src '{_sha256(style)}'; script-src '{_sha256(script)}'; "
              "base-uri 'none'; form-action 'none'")
    def finalize(value):  # control characters shown in the page's text and source, never sent (`cat page.html`)
        return Markup(printable(value)) if isinstance(value, Markup) else printable(value) if isinstance(
            value, str) else value

    environment = Environment(autoescape=True, undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                              finalize=finalize)
    template = environment.from_string((TEMPLATES / "view.html").read_text(encoding="utf-8"))
    return template.render(page=page, style=style, script=script, policy=policy)


def _sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


# ---- the runs --------------------------------------------------------------------------------------------------


def _run(path, role: str) -> dict:
    records = read_run(path)
    if not records:
        raise AmdError(f"{path}: run file has no tasks")
    memory = records[0]["memory"]
    return {"role": role, "path": str(path), "records": {record["task_id"]: record for record in records},
            "benchmark": records[0]["benchmark"], "agent": records[0]["agent"]["spec"], "config": memory["config"],
            "memory": memory, "label": f"{memory['config']} ({role})", "entries": {}}


def _check_pairable(run: dict, other: dict) -> None:
    if run["benchmark"] != other["benchmark"]:
        raise AmdError(f"--against {other['path']}: a {other['benchmark']} run, not {run['benchmark']} as "
                       f"{run['path']}")
    if not set(run["records"]) & set(other["records"]):
        raise AmdError(f"--against {other['path']}: no task in common with {run['path']}; pair two runs over the "
                       "same tasks")


def _summary(run: dict) -> dict:
    records = run["records"].values()
    memory = run["memory"]
    return {"role": run["role"], "path": run["path"], "agent": run["agent"], "config": run["config"],
            "label": run["label"], "protocol": memory.get("protocol") or "—",
            "bank": memory.get("bank") or "—", "tasks": len(records), "solved": sum(r["success"] for r in records),
            "strict": sum(map(strict_success, records)),
            "steps": sum(r["n_steps"] for r in records),
            "tokens": sum(r["tokens"]["prompt"] + r["tokens"]["completion"] for r in records),
            "wall_time_s": round(sum(r["wall_time_s"] for r in records), 1)}


def _pair_counts(tasks: list[dict], columns: list[dict]) -> dict:
    both = [task for task in tasks if None not in task["verdicts"]]
    left, right = (column["label"] for column in columns)
    return {"tasks": len(both), "both": sum(all(t["verdicts"]) for t in both),
            "neither": sum(not any(t["verdicts"]) for t in both), "only": [
                (left, sum(t["verdicts"] == [True, False] for t in both)),
                (right, sum(t["verdicts"] == [False, True] for t in both))]}


# ---- one task --------------------------------------------------------------------------------------------------


def _task(index: int, task_id: str, runs: list[dict], columns: list[dict]) -> dict:
    records = [run["records"].get(task_id) for run in columns]
    verdicts = [None if record is None else record["success"] for record in records]
    first = next(record for record in records if record is not None)
    mine = runs[0]["records"].get(task_id)
    return {"index": index, "task_id": task_id, "instruction": first["instruction"], "verdicts": verdicts,
            "failed": mine is None or not mine["success"],
            "discordant": len(runs) == 2 and None not in verdicts and verdicts[0] != verdicts[1],
            "sides": [None if record is None else _side(record, run["entries"])
                      for run, record in zip(columns, records)]}


def _side(record: TrajectoryRecord, entries: dict) -> dict:
    def injected(items) -> list[dict]:
        return [_injection(item, entries) for item in items or []]

    step_number = 0
    turns = []
    for turn in record["turns"]:
        steps = []
        for step in turn["steps"]:
            step_number += 1
            steps.append({**STEP_DEFAULTS, **step, "number": step_number,
                          "injected": injected(step.get("injected_memory")),
                          "details": _json(step.get("memory_details"))})
        turns.append({"user": turn["user"], "injected": injected(turn.get("injected_memory")), "steps": steps})
    return {"success": record["success"], "strict": strict_success(record), "status": record["status"],
            "error": record.get("error"),
            "n_steps": record["n_steps"], "tokens": record["tokens"], "wall_time_s": record["wall_time_s"],
            "system_memory": injected(record.get("system_memory")), "details": _json(record.get("memory_details")),
            "checker": _json(record["checker"]), "turns": turns,
            "extra_calls": {key: record[key] for key in ("memory_calls", "user_calls") if key in record}}


def _injection(item: dict, entries: dict) -> dict:
    similarity = item.get("similarity")
    entry = entries.get(item["entry_id"])
    return {**INJECTION_DEFAULTS, **item, "similarity_text": "—" if similarity is None else f"{similarity:.3f}",
            "extra": [(key, value if isinstance(value, str) else json.dumps(value)) for key, value in item.items()
                      if key not in INJECTION_SHOWN],
            "fields": None if entry is None else [(key, value if isinstance(value, str) else _json(value))
                                                  for key, value in entry.items() if key not in SHOWN_ELSEWHERE]}


def _json(value) -> str:
    return json.dumps(value, indent=1, ensure_ascii=False) if value else ""


# ---- the bank's entries ------------------------------------------------------------------------------------------


def _attach_entries(bank_dir, runs: list[dict]) -> None:
    """Each run that read this bank (by its manifest's sha256, where the run recorded one) gets its entries by id,
    and those its method says the run added (its spec's run_entries, e.g. an online run's). One of the runs must
    have read it."""
    from amd.memory.bank import load_bank

    bank = load_bank(bank_dir)
    readers = [run for run in runs if run["memory"].get("bank")
               and run["memory"].get("bank_sha256") in (None, bank.manifest_sha256)]
    if not readers:
        read = "; ".join(f"{run['path']}: {run['memory'].get('bank') or 'no bank'}" for run in runs)
        raise AmdError(f"--bank {bank_dir}: no run read this bank (its manifest's sha256 is "
                       f"{bank.manifest_sha256[:12]}...; the runs read {read})")
    entries = {entry["id"]: entry for type_entries in bank.entries.values() for entry in type_entries}
    for run in readers:
        spec = run_method(run["memory"])
        added = load_target(spec.run_entries)(run["path"]) if spec and spec.run_entries else {}
        run["entries"] = entries | added
