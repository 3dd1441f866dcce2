"""Leakage protocols for retrieval (paper Appendix B.3), over task groups: a group is a scenario and its variants
(a benchmark's `task_group`), and a protocol never separates a group's tasks.

    self_excluded  (default) memory from the whole bank, but never an entry distilled from the task's own group
    cross_split    a deterministic 7:3 split of the bank's groups: memory only from the 70 % side, evaluation
                   only on tasks of the 30 % side (`eval_task_ids`)
    shared         the paper's main (leaky) protocol: any entry, the task's own included; only by name, warned
"""

import hashlib
import json
from pathlib import Path

from amd.errors import AmdError

MEMORY_FRACTION = 0.7


def split_groups(groups, seed: int) -> tuple[list[str], list[str]]:
    """(memory groups, eval groups): round(70 %) of the groups go to memory. Ordering by sha256(seed, group) makes
    the split depend only on the set of groups and the seed, never on input order or Python's hash salt."""
    ranked = sorted(set(groups), key=lambda group: hashlib.sha256(f"{seed}:{group}".encode()).hexdigest())
    cut = round(MEMORY_FRACTION * len(ranked))
    return sorted(ranked[:cut]), sorted(ranked[cut:])


def bank_task_groups(bank_dir) -> dict[str, str]:
    """task id -> group, for every task of the trajectories a bank was built from (failed ones too)."""
    manifest = Path(bank_dir) / "manifest.json"
    if not manifest.exists():
        raise AmdError(f"{bank_dir}: not a memory bank (no manifest.json)")
    return json.loads(manifest.read_text())["task_groups"]


def memory_groups(task_groups: dict[str, str], seed: int) -> set[str]:
    return set(split_groups(task_groups.values(), seed)[0])


def eval_task_ids(bank_dir, seed: int = 0) -> list[str]:
    """The held-out tasks a cross_split run must evaluate on: those of the groups on the evaluation side."""
    task_groups = bank_task_groups(bank_dir)
    held_out = set(split_groups(task_groups.values(), seed)[1])
    return sorted(task for task, group in task_groups.items() if group in held_out)
