"""AMD with online memory (run option `online`, `amd run --online`; beyond the paper): after each finished task,
the student's successful trajectory is distilled into entries of the config's types, exactly as a bank build
distils a teacher's (`build_entries`), and added to the bank unless near-duplicates cover it; entries retrieved by
tasks that then fail lose rank (`amd.memory.online`).

Run options: `online_writer` — who distils: `rules`, `student` (the student's own model, as for the paper's
Student Memory) or any model spec; default the bank's own writer. `online_dedup` — the cosine at or above which
an entry of the same lookup key (function entries: the same function) is a near-duplicate (default 0.95; 1.01:
never). `online_decay` — rank lost per net failure (default 0.05; 0: none).

Tasks run one at a time in task order, so a task sees exactly what the tasks before it added. Self-exclusion holds
for added entries too: each carries its task's group. Injection records of an online run say `online` (whether
the entry was added during the run) and `rank_penalty` (where it ranks below its cosine).
"""

import logging
from pathlib import Path
from typing import Any, cast

from amd.agent.hooks import Injection, RunContext, TaskContext
from amd.core.errors import AmdError
from amd.core.trajectory import TrajectoryRecord
from amd.core.vocabulary import SHARED
from amd.memory.online import (
    History,
    OnlineBank,
    history_events,
    history_path,
    injected_entry_ids,
    redundant,
    seed_events,
)
from amd.memory.protocols import unit_field
from amd.memory.writing import RULES, open_writer
from amd.methods.amd.entries import BuildSettings, build_entries
from amd.methods.amd.retrieval import AmdHooks

log = logging.getLogger("amd.memory")
STUDENT = "student"
DEFAULT_DEDUP, DEFAULT_DECAY = 0.95, 0.05
ONLINE_PREFIX = "online:"


class OnlineAmdHooks(AmdHooks):
    one_task_at_a_time = True
    bank: OnlineBank  # the frozen bank, copied, growing as tasks succeed

    def __init__(self, bank, config, settings):
        super().__init__(bank, config, settings)
        options = settings.options
        self.writer_spec = str(options.get("online_writer") or bank.manifest["writer"]["spec"])
        self.dedup = float(options.get("online_dedup", DEFAULT_DEDUP))  # bounds: the spec's (parsed in open_memory)
        self.decay = float(options.get("online_decay", DEFAULT_DECAY))
        self.bank = OnlineBank(self.bank, self.decay, _lookup_key)
        self.embedded = {t: spec["embedded"] for t, spec in bank.manifest["types"].items()}
        self.benchmark, self.history, self._writer = None, None, None

    def describe(self) -> dict:
        return {**super().describe(),
                "online": {"writer": self.writer_spec, "dedup": self.dedup, "decay": self.decay}}

    # ---- the run -----------------------------------------------------------------------------------------------

    def run_start(self, run: RunContext) -> None:
        """Rebuild the online state of a resumed run from its history, replaying one event per finished task."""
        finished_ids = [record["task_id"] for record in run.finished]
        if finished_ids != run.task_ids[: len(finished_ids)]:
            raise AmdError(f"{run.out_path}: an online run resumes only in task order, but its finished tasks are not "
                           "the first ones of the run's tasks; choose another --out")
        self.benchmark = run.benchmark
        self.history = History(history_path(run.out_path), self.describe())
        for event in self.history.resume(run.finished):
            self._apply(event)
        if run.finished:
            log.info("online memory: replayed %d tasks from %s, bank now %s", len(run.finished), self.history.path,
                     self.bank.counts())

    def seed(self, source_out: Path, out_path: Path, records: list[TrajectoryRecord]) -> int:
        """A seeded run's history: the events of `records` from the history beside `source_out` (gzipped or not),
        as far as they match them, under this setting's header; the tasks past them run again."""
        events = seed_events(source_out, self.describe(), records)
        History(history_path(out_path), self.describe()).write(events)
        return len(events)

    def episode_end(self, task: TaskContext, record: dict) -> None:
        super().episode_end(task, record)
        event = self._learn(task, record)
        self._apply(event)
        event["rank"] = self.bank.rank_of(event["retrieved"])
        event["bank_size"] = self.bank.counts()
        self.history.append(event)

    def run_end(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    # ---- injections say what came from the online part ---------------------------------------------------------

    def task_start(self, task: TaskContext) -> Injection:
        return self._marked(super().task_start(task))

    def user_turn(self, task: TaskContext, message: str) -> Injection:
        return self._marked(super().user_turn(task, message))

    def after_error(self, task: TaskContext, failing_functions: list[str]) -> Injection:
        return self._marked(super().after_error(task, failing_functions))

    def _marked(self, injection: Injection) -> Injection:
        for injected in injection.records:
            record = cast(dict[str, Any], injected)  # the fields of the spec's record_fields, beside the common ones
            record["online"] = record["entry_id"] in self.bank.online_ids
            penalty = self.bank.penalty(record["entry_id"])
            if penalty:
                record["rank_penalty"] = round(penalty, 6)
        return injection

    # ---- learning from a finished task -------------------------------------------------------------------------

    def _learn(self, task: TaskContext, record: dict) -> dict:
        """The event of one finished task: what it retrieved, its verdict, and (for a success) the entries to add
        and the dedup decisions. Changes nothing; `_apply` does."""
        event = {"task_id": record["task_id"], "task_group": record["task_group"], "success": record["success"],
                 "retrieved": injected_entry_ids(record), "added": [], "dedup": []}
        if record["success"] is not True:
            return event
        chat, usage = self._counted(self._writer_chat(task))
        built = build_entries(record, self.benchmark, chat, types=self.types,
                              settings=BuildSettings.described(self.bank.method_field("build_settings")))
        event["writer"] = usage
        event["audit"] = dict(built.audit)
        shared, unit = self.settings.protocol == SHARED, unit_field(self.settings.protocol)
        for type_name in self.types:
            candidates = [_online_entry(entry, record) for entry in getattr(built, type_name)]
            vectors = self.embedder.embed([entry[self.embedded[type_name]] for entry in candidates])
            accepted: list[Any] = []
            for entry, vector in zip(candidates, vectors):
                near = self.bank.near_duplicates(type_name, entry, vector, self.dedup, accepted)
                dropped = redundant(entry[unit], [other[unit] for other, _ in near], shared)
                if near:
                    event["dedup"].append({"entry_id": entry["id"], "dropped": dropped, "near": [
                        {"entry_id": other["id"], "source_group": other["source_group"], "similarity": round(s, 6)}
                        for other, s in near]})
                if not dropped:
                    accepted.append((entry, vector))
            event["added"] += [entry for entry, _ in accepted]
        return event

    def _apply(self, event: dict) -> None:
        self.bank.record_outcome(event["retrieved"], event["success"] is True)
        for type_name in self.types:
            added = [entry for entry in event["added"] if entry["type"] == type_name]
            if not added:
                continue
            first_row = len(self.bank.entries[type_name])
            self.bank.add(type_name, added, self.embedder.embed([entry[self.embedded[type_name]] for entry in added]))
            if type_name == "function":
                self.function_vectors = self.bank.vectors("function")
                self._index_function_names(first_row)

    def _writer_chat(self, task: TaskContext):
        """The chat that distils (None for the rules writer)."""
        if self.writer_spec == RULES:
            return None
        if self.writer_spec == STUDENT:
            if task.student is None:
                raise AmdError("online_writer=student needs a student with a model (this agent has none)")
            return task.student
        if self._writer is None:
            bank_writer = self.bank.manifest["writer"]
            params = bank_writer.get("params") if bank_writer.get("spec") == self.writer_spec else None
            self._writer = open_writer(self.writer_spec, params)
        return self._writer.chat

    @staticmethod
    def _counted(chat):
        """`chat` that also sums what the writer asked (calls, tokens) into the returned dict."""
        usage = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
        if chat is None:
            return None, usage

        def counted(messages):
            reply = chat(messages)
            usage["calls"] += 1
            usage["prompt_tokens"] += reply.prompt_tokens or 0
            usage["completion_tokens"] += reply.completion_tokens or 0
            return reply

        return counted, usage


def _online_entry(entry: dict, record: dict) -> dict:
    """An entry distilled during the run: its id says so, and it carries its task's group (self-exclusion)."""
    return {**entry, "id": ONLINE_PREFIX + entry["id"], "source_group": record["task_group"]}


def _lookup_key(type_name: str, entry: dict):
    """Entries compete for the same retrievals only within one key: function entries are looked up by name."""
    return (entry.get("app"), entry["name"]) if type_name == "function" else None


# ---- what the analysis reads of a finished online run (the spec's run_usage and run_entries) --------------------


def writer_usage(records: list[dict], run_path) -> list[dict]:
    """The tokens an online run's writer model took, from its history (none for the rules writer, and the student's
    are in the records' memory_calls already); amd.analysis.cost prices them."""
    online = records[0]["memory"].get("online") if records else None
    if not online or online["writer"] in (RULES, STUDENT):
        return []
    events = history_events(run_path)
    if events is None:
        return [{"role": "writer", "spec": online["writer"], "known": False,
                 "note": f"writer: the online run's history {history_path(run_path)} is missing: its writer "
                         "model's tokens are unknown"}]
    written = [event.get("writer", {}) for event in events]
    return [{"role": "writer", "spec": online["writer"], "prompt": sum(w.get("prompt_tokens", 0) for w in written),
             "completion": sum(w.get("completion_tokens", 0) for w in written)}]


def added_entries(run_path) -> dict:
    """The entries an online run added to its bank, by id, from its history (amd view shows their text)."""
    return {entry["id"]: entry for event in history_events(run_path) or [] for entry in event["added"]}
