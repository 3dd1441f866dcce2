"""Retrieval and injection (paper Section 3.3): the `MemoryHooks` the agent loop calls.

Named configs choose the memory types: zero_shot (none: `load_memory_hooks` returns None), wf, wf_st, wf_st_fn,
wf_fn, st_only, fn_only. k is per type (default 1 each); δ, the minimum cosine, is per vector type (workflow 0.30,
subtask 0.45, as in the authors' release); function records are looked up by name and ranked by
cosine(instruction, record reasoning) without a δ.
"""

import logging

from amd.errors import AmdError, did_you_mean
from amd.memory.bank import Bank, load_bank
from amd.memory.embed import get_embedder
from amd.memory.protocols import check_protocol, split_tasks
from amd.memory.render import check_representation, render_block

log = logging.getLogger("amd.memory")

CONFIGS = {
    "zero_shot": (),
    "wf": ("workflow",),
    "wf_st": ("workflow", "subtask"),
    "wf_st_fn": ("workflow", "subtask", "function"),
    "wf_fn": ("workflow", "function"),
    "st_only": ("subtask",),
    "fn_only": ("function",),
}
DEFAULT_K = {"workflow": 1, "subtask": 1, "function": 1}
DEFAULT_DELTA = {"workflow": 0.30, "subtask": 0.45}


def config_types(config: str) -> tuple[str, ...]:
    if config not in CONFIGS:
        raise AmdError(f"unknown memory config {config!r}{did_you_mean(config, CONFIGS)}; "
                       f"allowed: {', '.join(CONFIGS)}")
    return CONFIGS[config]


def load_memory_hooks(bank_dir, config: str, protocol: str = "self_excluded", k=None, delta=None,
                      split_seed: int = 0, per_turn: bool = False, representation: dict | None = None):
    """Hooks for `config` over the bank at `bank_dir`, or None for zero_shot.
    `k`/`delta`: a number for every type or a dict per type; `representation`: {type: "prose"|"code"}, over the
    bank's default."""
    types = config_types(config)
    check_protocol(protocol)
    if not types:
        return None
    bank = load_bank(bank_dir)
    memory_ids = None
    if protocol == "cross_split":
        memory_ids = set(split_tasks(bank.manifest["task_ids"], split_seed)[0])
        bank = bank.restricted(memory_ids)
    elif protocol == "shared":
        log.warning("memory protocol 'shared': a task may retrieve memory distilled from itself (leaky; the "
                    "paper's main protocol)")
    return BankMemoryHooks(bank, config, types, protocol, _per_type(k, DEFAULT_K, "k"),
                           _per_type(delta, DEFAULT_DELTA, "delta"), split_seed, memory_ids, per_turn,
                           check_representation(representation, bank.manifest["representation"]["default"]),
                           str(bank_dir))


def _per_type(value, defaults: dict, what: str) -> dict:
    if value is None:
        return dict(defaults)
    chosen = dict.fromkeys(defaults, value) if isinstance(value, (int, float)) else {**defaults, **value}
    for memory_type, number in chosen.items():
        if memory_type not in defaults or not isinstance(number, (int, float)):
            raise AmdError(f"bad memory {what} {memory_type}={number!r}; types: {', '.join(defaults)}")
        if what == "k" and (number != int(number) or number < 1):
            raise AmdError(f"memory k for {memory_type} must be a whole number ≥ 1, got {number!r}")
    return chosen


class BankMemoryHooks:
    def __init__(self, bank: Bank, config, types, protocol, k, delta, split_seed, memory_ids, per_turn,
                 representation, bank_dir):
        self.bank, self.config, self.types, self.protocol = bank, config, types, protocol
        self.k, self.delta, self.split_seed, self.memory_ids = k, delta, split_seed, memory_ids
        self.per_turn_subtasks, self.representation, self.bank_dir = per_turn, representation, bank_dir
        self.embedder = get_embedder(bank.manifest["embedder"])

    def describe(self) -> dict:
        described = {
            "config": self.config, "bank": self.bank_dir, "bank_sha256": self.bank.manifest_sha256,
            "protocol": self.protocol, "k": {t: self.k[t] for t in self.types},
            "delta": {t: self.delta[t] for t in self.types if t in self.delta},
            "representation": {t: self.representation[t] for t in self.types},
            "per_turn": self.per_turn_subtasks and "subtask" in self.types,
        }
        if self.protocol == "cross_split":
            described["split_seed"] = self.split_seed
        return described

    # ---- proactive ----------------------------------------------------------------------------------------

    def proactive(self, task_id, instruction, decompose) -> tuple[str, list[dict]]:
        excluded = self._excluded(task_id)
        blocks, records = [], []
        if "workflow" in self.types:
            hits = self._search("workflow", instruction, excluded)
            blocks.append(self._block("workflow", hits))
            records += _records("workflow", hits, instruction)
        if "subtask" in self.types and not self.per_turn_subtasks:
            seen = set()
            hits_by_label = []
            for label in decompose(instruction):
                fresh = [(e, s) for e, s in self._search("subtask", label, excluded) if e["id"] not in seen]
                seen.update(e["id"] for e, _ in fresh)
                hits_by_label.append((label, fresh))
            blocks.append(self._block("subtask", [hit for _, hits in hits_by_label for hit in hits]))
            records += [r for label, hits in hits_by_label for r in _records("subtask", hits, label)]
        return "\n\n".join(block for block in blocks if block), records

    def per_turn(self, task_id, user_message) -> tuple[str, list[dict]]:
        if "subtask" not in self.types or not self.per_turn_subtasks:
            return "", []
        hits = self._search("subtask", user_message, self._excluded(task_id))
        return self._block("subtask", hits), _records("subtask", hits, user_message)

    # ---- reactive -----------------------------------------------------------------------------------------

    def reactive(self, task_id, instruction, failing_functions) -> tuple[str, list[dict]]:
        """Per failing function name: its records, ranked by cosine(instruction, record reasoning), top-k."""
        if "function" not in self.types:
            return "", []
        excluded = self._excluded(task_id)
        query = None
        hits, records = [], []
        for name in dict.fromkeys(failing_functions):
            rows = [row for row in self.bank.by_name.get(name, [])
                    if self.bank.entries["function"][row]["source_task_id"] != excluded]
            rows = [row for row in dict.fromkeys(rows) if all(row != r for r, _ in hits)]
            if not rows:
                continue
            query = self.embedder.embed_one(instruction) if query is None else query
            scores = self.bank.reasoning[rows] @ query
            ranked = sorted(zip(rows, scores.tolist()), key=lambda pair: (-pair[1], pair[0]))[: self.k["function"]]
            hits += ranked
            records += _records("function", [(self.bank.entries["function"][r], s) for r, s in ranked], name)
        entries = [(self.bank.entries["function"][row], score) for row, score in hits]
        return self._block("function", entries), records

    # ---- helpers ------------------------------------------------------------------------------------------

    def _excluded(self, task_id: str) -> str | None:
        if self.protocol == "cross_split" and task_id in self.memory_ids:
            raise AmdError(f"task {task_id} is on the memory side of the cross split (seed {self.split_seed}); "
                           f"evaluate only the held-out tasks (amd.memory.protocols.eval_task_ids)")
        return None if self.protocol == "shared" else task_id

    def _search(self, memory_type: str, query: str, excluded: str | None) -> list[tuple[dict, float]]:
        vector = self.embedder.embed_one(query)
        return self.bank.search(memory_type, vector, self.k[memory_type], self.delta[memory_type], excluded)

    def _block(self, memory_type: str, hits: list[tuple[dict, float]]) -> str:
        return render_block(memory_type, [entry for entry, _ in hits], self.representation[memory_type])


def _records(memory_type: str, hits: list[tuple[dict, float]], query: str) -> list[dict]:
    return [{"type": memory_type, "entry_id": entry["id"], "source_task_id": entry["source_task_id"],
             "similarity": round(float(score), 6), "query": query} for entry, score in hits]
