"""A toy memory method for tests/test_plugins.py (its spec: random_k_spec.py): one note per trajectory (its
instruction and the calls it made), and at task start k notes drawn at random — seeded by the task id, so a rerun
draws the same — from the tasks of other groups. It shows the whole plug-in surface: build from all records (build
option `failures=false`: successes only), run-time hooks with options (`heading`, `shout`), the shared protocols,
and a table of its own (`random_notes`) over the columns it computes from its runs (`notes_by_task`).
"""

import random
from typing import Any, final

import pandas as pd

from amd.api import (
    AmdError,
    Bank,
    BankContents,
    BankHooks,
    BuildContext,
    Injection,
    InjectionRecord,
    MemoryConfig,
    MemoryMethod,
    RetrievalSettings,
    TaskContext,
    TrajectoryRecord,
    student_runs,
)

NOTE = "random_note"
HEADING = "Notes from other tasks:"


@final
class RandomK(MemoryMethod):
    name = "random_k"
    version = "1"

    def build(self, records: list[TrajectoryRecord], context: BuildContext) -> BankContents:
        keep_failures = context.options.get("failures", True)  # parsed by its declaration: a bool
        notes = []
        for record in records:
            if not (record["success"] or keep_failures):
                continue
            calls = [call["call"] for turn in record["turns"] for step in turn["steps"] for call in step["calls"]]
            outcome = "solved" if record["success"] else "failed"
            notes.append({"id": f"{NOTE}:{record['task_id']}", "type": NOTE, "source_task_id": record["task_id"],
                          "text": f"{record['instruction']} ({outcome}): {'; '.join(calls) or 'no calls'}"})
        return BankContents(entries={NOTE: notes}, embedded={NOTE: "text"})

    def open(self, bank: Bank, config: MemoryConfig, settings: RetrievalSettings) -> "RandomNotes":
        return RandomNotes(bank, config, settings)


@final
class RandomNotes(BankHooks):
    def __init__(self, bank: Bank, config: MemoryConfig, settings: RetrievalSettings):
        super().__init__(bank, config, settings)
        heading = str(settings.options.get("heading", HEADING))
        self.heading = heading.upper() if settings.options.get("shout", False) else heading

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "heading": self.heading}

    def task_start(self, task: TaskContext) -> Injection:
        excluded = self.excluded(task)
        candidates = [entry for entry in self.bank.entries[NOTE] if not excluded.hides(entry)]
        chosen = random.Random(task.task_id).sample(candidates, min(self.settings.k[NOTE], len(candidates)))
        text = self.heading + "\n" + "\n".join(f"- {entry['text']}" for entry in chosen) if chosen else ""
        records: list[InjectionRecord] = [
            {"type": NOTE, "entry_id": entry["id"], "source_task_id": entry["source_task_id"],
             "source_group": entry["source_group"], "similarity": None, "query": "random"} for entry in chosen]
        return Injection(text, records)


def notes_by_task(records: list[TrajectoryRecord]) -> dict[str, dict[str, int]]:
    """The runs frame's column for the table below: notes injected per task."""
    return {"notes_by_task": {record["task_id"]: len(record.get("system_memory", [])) for record in records}}


def random_notes(runs: pd.DataFrame) -> pd.DataFrame:
    """Random notes: per random_k run, the notes each task saw and the share of tasks solved."""
    students = student_runs(runs)
    mine = students[students["memcfg"] == "random_k"]
    if mine.empty:
        raise AmdError("random_notes: no random_k run among --runs")
    return pd.DataFrame([{"benchmark": row.benchmark, "student": row.student, "k": row.k_text,
                          "notes_per_task": sum(row.notes_by_task.values()) / len(row.notes_by_task),
                          "success": row.success_rate} for row in mine.itertuples()])
