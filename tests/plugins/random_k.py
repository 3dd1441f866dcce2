"""A toy memory method for tests/test_plugins.py: one note per trajectory (its instruction and the calls it made),
and at task start k notes drawn at random — seeded by the task id, so a rerun draws the same — from the tasks of
other groups. It shows the whole plug-in surface: build from all records, run-time hooks, the shared protocols.
"""

import random

from amd.agent.hooks import Injection
from amd.memory.bank import BankContents
from amd.memory.method import BankHooks

NOTE = "random_note"


class RandomK:
    name = "random_k"
    version = "1"

    def build(self, records, context) -> BankContents:
        notes = []
        for record in records:
            calls = [call["call"] for turn in record["turns"] for step in turn["steps"] for call in step["calls"]]
            outcome = "solved" if record["success"] else "failed"
            notes.append({"id": f"{NOTE}:{record['task_id']}", "type": NOTE, "source_task_id": record["task_id"],
                          "text": f"{record['instruction']} ({outcome}): {'; '.join(calls) or 'no calls'}"})
        return BankContents(entries={NOTE: notes}, embedded={NOTE: "text"})

    def open(self, bank, config, settings):
        return RandomNotes(bank, config, settings)


class RandomNotes(BankHooks):
    def task_start(self, task) -> Injection:
        excluded = self.excluded_group(task)
        candidates = [entry for entry in self.bank.entries[NOTE] if entry["source_group"] != excluded]
        chosen = random.Random(task.task_id).sample(candidates, min(self.settings.k[NOTE], len(candidates)))
        text = "Notes from other tasks:\n" + "\n".join(f"- {entry['text']}" for entry in chosen) if chosen else ""
        records = [{"type": NOTE, "entry_id": entry["id"], "source_task_id": entry["source_task_id"],
                    "similarity": None, "query": "random"} for entry in chosen]
        return Injection(text, records)
