"""AMD's retrieval and injection (paper Section 3.3).

Proactive, at task start: top-k workflow entries by the instruction; the student decomposes the instruction into
at most six subtask labels, each label retrieves top-k subtask segments, duplicates dropped; both go into the
system prompt. With the run option `per_turn`, subtasks are retrieved by each user turn instead (as the authors
did for BFCL). Reactive, after an error: the failing function's records, looked up by name, ranked by
cosine(instruction, record reasoning), top-k appended after the error. δ applies to the vector types only.
Online (run option `online`, amd.memory.amd.online), entries that failed rank lower; a frozen bank ranks by cosine.
"""

import numpy as np

from amd.agent.hooks import Injection, TaskContext
from amd.errors import AmdError
from amd.memory.amd.decompose import decompose_instruction
from amd.memory.amd.render import check_representation, parse_representation, render_block
from amd.memory.method import BankHooks, injection_records

RUN_OPTIONS = ("per_turn", "representation", "online", "online_writer", "online_dedup", "online_decay")
TRUE, FALSE = ("1", "true", "yes"), ("0", "false", "no")


class AmdHooks(BankHooks):
    def __init__(self, bank, config, settings):
        super().__init__(bank, config, settings)
        options = settings.options
        unknown = set(options) - set(RUN_OPTIONS)
        if unknown:
            raise AmdError(f"memory method amd has no run option {sorted(unknown)}; options: {', '.join(RUN_OPTIONS)}")
        self.per_turn_subtasks = "subtask" in self.types and flag(options.get("per_turn", False), "per_turn")
        self.representation = check_representation(parse_representation(options.get("representation") or {}),
                                                   bank.manifest["representation"]["default"])
        self.function_vectors = self.bank.vectors("function")
        self.by_name: dict[str, list[int]] = {}
        self._index_function_names(0)

    def _index_function_names(self, first_row: int) -> None:
        """Function entries from `first_row` on, by name and by app.name."""
        for row, entry in enumerate(self.bank.entries["function"][first_row:], start=first_row):
            self.by_name.setdefault(entry["name"], []).append(row)
            if entry.get("app"):
                self.by_name.setdefault(f"{entry['app']}.{entry['name']}", []).append(row)

    def describe(self) -> dict:
        return {**super().describe(), "representation": {t: self.representation[t] for t in self.types},
                "per_turn": self.per_turn_subtasks}

    def task_start(self, task: TaskContext) -> Injection:
        blocks, records = [], []
        if "workflow" in self.types:
            hits = self.search("workflow", task.instruction, task)
            blocks.append(self._block("workflow", hits))
            records += injection_records("workflow", hits, task.instruction)
        if "subtask" in self.types and not self.per_turn_subtasks:
            labels = decompose_instruction(task.student, task.instruction) if task.student else [task.instruction]
            seen, hits_by_label = set(), []
            for label in labels:
                fresh = [(e, s) for e, s in self.search("subtask", label, task) if e["id"] not in seen]
                seen.update(e["id"] for e, _ in fresh)
                hits_by_label.append((label, fresh))
            blocks.append(self._block("subtask", [hit for _, hits in hits_by_label for hit in hits]))
            records += [r for label, hits in hits_by_label for r in injection_records("subtask", hits, label)]
        return Injection("\n\n".join(block for block in blocks if block), records)

    def user_turn(self, task: TaskContext, message: str) -> Injection:
        if not self.per_turn_subtasks:
            return Injection()
        hits = self.search("subtask", message, task)
        return Injection(self._block("subtask", hits), injection_records("subtask", hits, message))

    def after_error(self, task: TaskContext, failing_functions: list[str]) -> Injection:
        """Per failing function name: its records, ranked by cosine(instruction, record reasoning) less the bank's
        penalty (none when frozen), top-k."""
        if "function" not in self.types:
            return Injection()
        excluded = self.excluded_group(task)
        entries = self.bank.entries["function"]
        query, hits, records = None, [], []
        for name in dict.fromkeys(failing_functions):
            rows = [row for row in dict.fromkeys(self.by_name.get(name, []))
                    if entries[row]["source_group"] != excluded and all(row != r for r, _ in hits)]
            if not rows:
                continue
            query = self.embedder.embed_one(task.instruction) if query is None else query
            scores = (self.function_vectors[rows] @ query).tolist()
            ranks = (np.asarray(scores) - self.bank.penalties("function", rows)).tolist()
            order = sorted(range(len(rows)), key=lambda i: (-ranks[i], rows[i]))[: self.settings.k["function"]]
            ranked = [(rows[i], scores[i]) for i in order]
            hits += ranked
            records += injection_records("function", [(entries[r], s) for r, s in ranked], name)
        return Injection(self._block("function", [(entries[row], score) for row, score in hits]), records)

    def _block(self, memory_type: str, hits: list[tuple[dict, float]]) -> str:
        return render_block(memory_type, [entry for entry, _ in hits], self.representation[memory_type])


def flag(value, name: str) -> bool:
    text = str(value).strip().lower()
    if text not in TRUE + FALSE:
        raise AmdError(f"memory option {name} must be true or false, got {value!r}")
    return text in TRUE
