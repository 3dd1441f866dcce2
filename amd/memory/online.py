"""Online memory (beyond the paper, whose memory stays frozen at inference time, §6): a frozen bank plus what a run
adds to it as its tasks finish, and the run's history of those changes. The method decides what to learn from a
finished task (AMD: amd.methods.amd.online); this module holds the store and the history.

- The frozen bank on disk is never changed: `OnlineBank` holds copies of its entries and indexes in memory, plus
  the entries added during the run.
- Rank: cosine − decay × max(0, failed − succeeded), counting the finished tasks that retrieved the entry and then
  failed or succeeded (after MemP's idea of deprecating memories that keep failing); δ applies to the rank, so an
  entry that keeps failing drops out of retrieval. An entry never retrieved by a failing task keeps its cosine.
- Dedup: a new entry is dropped when near-duplicates (cosine ≥ the threshold, same lookup key) cover every task
  that could retrieve it (`redundant`), so dedup never hides memory from a task that self-exclusion lets see it.
- History: `RUN.online.jsonl` beside the run output: a header line (the run's memory setting), then one event per
  finished task in task order (what it retrieved, its verdict, the entries it added, the dedup decisions, the rank
  of what it retrieved afterwards). A resumed run replays the events, so nothing is distilled twice.
"""

import json
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from amd.core.errors import AmdError
from amd.core.files import atomic_file, whole_lines
from amd.core.schema import drop_truncated_tail
from amd.memory.bank import Bank, flat_index
from amd.memory.protocols import NOTHING, Exclusion

HISTORY_SCHEMA = "amd.online_history/1"
log = logging.getLogger("amd.memory")


def history_path(out_path) -> Path:
    return Path(f"{out_path}.online.jsonl")


def seed_events(source_out, memory: dict, records: list) -> list[dict]:
    """The events of `records` (a seeded run's first tasks, in order) in the history beside another copy of the run's
    output, `source_out` (gzipped or not, as is its history: a release's): those that match them, in order, under a
    header of the same memory setting; none where it has no such history."""
    base = history_path(str(source_out).removesuffix(".gz"))
    source = next((path for path in (Path(f"{base}.gz"), base) if path.exists()), base)
    try:
        lines = [json.loads(line) for line in whole_lines(source) if line.strip()]
    except ValueError as error:
        raise AmdError(f"{source}: corrupt online history ({error}); restore it or seed from another copy") from None
    if not lines or lines[0] != {"schema": HISTORY_SCHEMA, "memory": memory}:
        log.warning("%s: %s, so the online memory of its %d tasks cannot be rebuilt: they run again", source,
                    "no online history" if not lines else "the history of another memory setting", len(records))
        return []
    matched = []
    for event, record in zip(lines[1:], records):
        if (event["task_id"], event["success"]) != (record["task_id"], record["success"]):
            break
        matched.append(event)
    return matched


def history_events(out_path) -> list[dict] | None:
    """The events of a run's online history, in task order (its header left out); None where it has none."""
    path = history_path(out_path)
    return History(path, {})._read()[1:] if path.exists() else None


class OnlineBank(Bank):
    """A frozen bank's entries and indexes, copied, plus the entries added during a run, with each entry's
    outcomes. While no entry of a type has lost rank, its search is the frozen bank's own (FAISS's order, ties
    included), so an online run retrieves what a frozen one does until it has learnt something."""

    def __init__(self, frozen: Bank, decay: float, lookup_key: Callable[[str, dict], object]):
        vectors = {t: np.asarray(frozen.vectors(t), dtype=np.float32) for t in frozen.entries}
        super().__init__(frozen.path, frozen.manifest, frozen.manifest_sha256,
                         {t: list(entries) for t, entries in frozen.entries.items()},
                         {t: flat_index(vectors[t], frozen.manifest["dim"]) for t in frozen.entries})
        self.decay, self.lookup_key, self._vectors = decay, lookup_key, vectors
        self._penalty = {t: np.zeros(len(entries), dtype=np.float32) for t, entries in self.entries.items()}
        self._where = {entry["id"]: (t, row) for t, entries in self.entries.items() for row, entry in enumerate(entries)}
        self.online_ids: set[str] = set()
        self.outcomes: dict[str, list[int]] = {}  # entry id -> [failed, succeeded]

    def vectors(self, type_name: str) -> np.ndarray:
        return self._vectors[type_name]

    def penalties(self, type_name: str, rows) -> np.ndarray:
        return self._penalty[type_name][list(rows)]

    def penalty(self, entry_id: str) -> float:
        type_name, row = self._where[entry_id]
        return float(self._penalty[type_name][row])

    def search(self, type_name: str, vector: np.ndarray, k: int, delta: float | None,
               excluded: Exclusion = NOTHING) -> list[tuple[dict, float]]:
        """Top-k entries by rank with rank ≥ delta (None: any), never one that `excluded` hides; each hit with its
        cosine."""
        penalty = self._penalty[type_name]
        if not penalty.any():
            return super().search(type_name, vector, k, delta, excluded)
        entries, index = self.entries[type_name], self.indexes[type_name]
        if k <= 0 or not entries:
            return []
        scores, rows = index.search(np.asarray(vector, dtype=np.float32).reshape(1, -1), index.ntotal)
        ranks = scores[0] - penalty[rows[0]]
        floor = -np.inf if delta is None else delta
        hits = [(entries[rows[0][i]], float(scores[0][i])) for i in np.argsort(-ranks, kind="stable")
                if ranks[i] >= floor and not excluded.hides(entries[rows[0][i]])]
        return hits[:k]

    def near_duplicates(self, type_name: str, entry: dict, vector: np.ndarray, threshold: float,
                        pending: Sequence[tuple[dict, np.ndarray]] = ()) -> list[tuple[dict, float]]:
        """Entries (of the bank, or `pending` ones not yet added) with the same lookup key and cosine ≥
        threshold, most similar first."""
        key = self.lookup_key(type_name, entry)
        candidates = list(zip(self.entries[type_name], (self._vectors[type_name] @ vector).tolist()))
        candidates += [(other, float(other_vector @ vector)) for other, other_vector in pending]
        found = [(other, score) for other, score in candidates
                 if score >= threshold and self.lookup_key(type_name, other) == key]
        return sorted(found, key=lambda hit: -hit[1])

    def add(self, type_name: str, entries: list[dict], vectors: np.ndarray) -> None:
        vectors = np.asarray(vectors, dtype=np.float32)
        for entry in entries:
            if entry["id"] in self._where:
                raise AmdError(f"online memory: entry {entry['id']} is added twice")
            self._where[entry["id"]] = (type_name, len(self.entries[type_name]))
            self.entries[type_name].append(entry)
            for name, counts in self.per_source[type_name].items():
                counts[entry[name]] += 1
            self.online_ids.add(entry["id"])
        self.indexes[type_name].add(vectors)
        self._vectors[type_name] = np.vstack([self._vectors[type_name], vectors])
        self._penalty[type_name] = np.concatenate([self._penalty[type_name], np.zeros(len(entries), np.float32)])

    def record_outcome(self, entry_ids: list[str], success: bool) -> None:
        """The finished task retrieved `entry_ids` and then succeeded or failed."""
        for entry_id in entry_ids:
            counts = self.outcomes.setdefault(entry_id, [0, 0])
            counts[1 if success else 0] += 1
            type_name, row = self._where[entry_id]
            self._penalty[type_name][row] = self.decay * max(0, counts[0] - counts[1])

    def rank_of(self, entry_ids: list[str]) -> list[dict]:
        return [{"entry_id": entry_id, "failed": self.outcomes[entry_id][0], "succeeded": self.outcomes[entry_id][1],
                 "penalty": round(self.penalty(entry_id), 6)} for entry_id in entry_ids]

    def counts(self) -> dict[str, int]:
        return {t: len(entries) for t, entries in self.entries.items()}


def redundant(unit: str, duplicate_units: list[str], shared: bool) -> bool:
    """Whether near-duplicates from these units (the protocol's: groups, or tasks) cover every task that may
    retrieve a new entry from `unit`: under `shared` any one does; otherwise a task never sees its own unit's
    entries, so a near-duplicate from the same unit, or near-duplicates from two different units, do."""
    if not duplicate_units:
        return False
    return shared or unit in duplicate_units or len(set(duplicate_units)) >= 2


def injected_entry_ids(record: dict) -> list[str]:
    """Every entry injected into the task (system prompt, user turns, after errors), once each, in order."""
    injections = list(record["system_memory"])
    for turn in record["turns"]:
        injections += turn.get("injected_memory", [])
        injections += [entry for step in turn["steps"] for entry in step.get("injected_memory", [])]
    return list(dict.fromkeys(entry["entry_id"] for entry in injections))


class History:
    """The run's online history: a header line, then one event per finished task; each line fsynced."""

    def __init__(self, path, memory: dict):
        self.path = Path(path)
        self.header = {"schema": HISTORY_SCHEMA, "memory": memory}

    def resume(self, finished: list[dict]) -> list[dict]:
        """The events of the `finished` records (one each, in their order). Without finished records a new
        history is started; an event past them (the task was killed before its record was written) is dropped."""
        if not finished or not self.path.exists():
            if finished:
                raise AmdError(f"{self.path}: missing, but the run has {len(finished)} finished tasks; its online "
                               "memory cannot be rebuilt: choose another --out")
            self.write([])
            return []
        drop_truncated_tail(self.path)
        header, *events = self._read()
        if header != self.header:
            raise AmdError(f"{self.path}: the online history of another memory setting ({header.get('memory')}); "
                           "choose another --out")
        if len(events) < len(finished):
            raise AmdError(f"{self.path}: {len(events)} events for {len(finished)} finished tasks (the file was cut "
                           "or replaced); its online memory cannot be rebuilt: choose another --out")
        for event, record in zip(events, finished):
            if (event["task_id"], event["success"]) != (record["task_id"], record["success"]):
                raise AmdError(f"{self.path}: event of task {event['task_id']} where the run has "
                               f"{record['task_id']}; choose another --out")
        if len(events) > len(finished):
            self.write(events[: len(finished)])
        return events[: len(finished)]

    def append(self, event: dict) -> None:
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(event, ensure_ascii=False) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def write(self, events: list[dict]) -> None:
        with atomic_file(self.path) as handle:
            handle.writelines(json.dumps(line, ensure_ascii=False) + "\n" for line in [self.header, *events])

    def _read(self) -> list[dict]:
        lines = []
        for number, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), start=1):
            try:
                lines.append(json.loads(line))
            except json.JSONDecodeError as error:
                raise AmdError(f"{self.path}:{number}: corrupt online history line ({error.msg})") from None
        if not lines:
            raise AmdError(f"{self.path}: empty online history; choose another --out")
        return lines
