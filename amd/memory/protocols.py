"""Leakage protocols for retrieval (paper Appendix B.3).

    self_excluded  (default) memory from the whole bank, but never an entry distilled from the task being solved
    cross_split    a deterministic 7:3 split of the bank's task ids: memory only from the 70 % side, evaluation
                   only on the 30 % side (`eval_task_ids`)
    shared         the paper's main (leaky) protocol: any entry, the task's own included; only by name, warned
"""

import hashlib
import json
from pathlib import Path

from amd.errors import AmdError, did_you_mean

PROTOCOLS = ("self_excluded", "cross_split", "shared")
MEMORY_FRACTION = 0.7


def check_protocol(protocol: str) -> str:
    if protocol not in PROTOCOLS:
        raise AmdError(f"unknown memory protocol {protocol!r}{did_you_mean(protocol, PROTOCOLS)}; "
                       f"allowed: {', '.join(PROTOCOLS)}")
    return protocol


def split_tasks(task_ids, seed: int) -> tuple[list[str], list[str]]:
    """(memory ids, eval ids): round(70 %) of the ids go to memory. Ordering by sha256(seed, id) makes the split
    depend only on the set of ids and the seed, never on input order or Python's hash salt."""
    ranked = sorted(set(task_ids), key=lambda task_id: hashlib.sha256(f"{seed}:{task_id}".encode()).hexdigest())
    cut = round(MEMORY_FRACTION * len(ranked))
    return sorted(ranked[:cut]), sorted(ranked[cut:])


def bank_task_ids(bank_dir) -> list[str]:
    """Every task id of the trajectories a bank was built from (failed ones too): the universe that is split."""
    manifest = Path(bank_dir) / "manifest.json"
    if not manifest.exists():
        raise AmdError(f"{bank_dir}: not a memory bank (no manifest.json)")
    return json.loads(manifest.read_text())["task_ids"]


def eval_task_ids(bank_dir, seed: int = 0) -> list[str]:
    """The held-out tasks a cross_split run must evaluate on."""
    return split_tasks(bank_task_ids(bank_dir), seed)[1]
