"""Leakage protocols for retrieval (paper Appendix B.3). Each has an exclusion unit (amd.core.vocabulary
EXCLUSION_UNITS): what a task never retrieves memory from. A *group* is a scenario and its variants (a benchmark's
`task_group`, e.g. AppWorld's xxxxxxx_1/_2/_3); a group-level protocol never separates a group's tasks. A *task*-level
protocol, the paper's, only keeps a task from its own memory: its siblings' memory stays retrievable.

    self_excluded       (default) memory from the whole bank, but never an entry distilled from the task's own group
    self_excluded_task  the paper's self-excluded retrieval: never an entry distilled from the task itself
    cross_split         a deterministic 7:3 split of the bank's groups: memory only from the 70 % side, evaluation
                        only on tasks of the 30 % side (`eval_task_ids`)
    cross_split_task    the paper's cross-split evaluation: the same 7:3 split over the bank's tasks
    shared              the paper's main (leaky) protocol: any entry, the task's own included; only by name, warned
"""

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from amd.core.errors import AmdError
from amd.core.vocabulary import EXCLUSION_UNITS, GROUP, TASK

MEMORY_FRACTION = 0.7
SOURCE_FIELDS = {GROUP: "source_group", TASK: "source_task_id"}  # the entry field naming its source unit


@dataclass(frozen=True)
class Exclusion:
    """The entries one task never retrieves under the run's leakage protocol (what `BankHooks.excluded(task)`
    returns): those whose `field` (`source_group` or `source_task_id`) is `value`; none when `field` is None
    (`shared`). A method that picks entries itself keeps the task's protocol by skipping those `hides` names."""

    field: str | None = None
    value: str | None = None

    def hides(self, entry: dict) -> bool:
        """Whether the task may not see `entry` (a bank entry, which holds both source fields)."""
        return self.field is not None and entry[self.field] == self.value


NOTHING = Exclusion()


def exclusion(protocol: str, task_id: str, task_group: str) -> Exclusion:
    """What the task `task_id` of group `task_group` never retrieves under `protocol`."""
    unit = EXCLUSION_UNITS[protocol]
    if unit is None:
        return NOTHING
    return Exclusion(SOURCE_FIELDS[unit], task_group if unit == GROUP else task_id)


def unit_field(protocol: str) -> str:
    """The entry field a protocol keeps apart (`shared` keeps nothing apart; its entries count by group)."""
    return SOURCE_FIELDS[EXCLUSION_UNITS[protocol] or GROUP]


def split_units(units, seed: int) -> tuple[list[str], list[str]]:
    """(memory units, eval units): round(70 %) of the units (groups or tasks) go to memory. Ordering by
    sha256(seed, unit) makes the split depend only on the set of units and the seed, never on input order or
    Python's hash salt."""
    ranked = sorted(set(units), key=lambda unit: hashlib.sha256(f"{seed}:{unit}".encode()).hexdigest())
    cut = round(MEMORY_FRACTION * len(ranked))
    return sorted(ranked[:cut]), sorted(ranked[cut:])


def bank_task_groups(bank_dir) -> dict[str, str]:
    """task id -> group, for every task of the trajectories a bank was built from (failed ones too)."""
    manifest = Path(bank_dir) / "manifest.json"
    if not manifest.exists():
        raise AmdError(f"{bank_dir}: not a memory bank (no manifest.json)")
    return json.loads(manifest.read_text())["task_groups"]


def task_units(task_groups: dict[str, str], protocol: str) -> dict[str, str]:
    """task id -> the unit a protocol splits by: its group, or the task itself."""
    return {task: group if EXCLUSION_UNITS[protocol] == GROUP else task for task, group in task_groups.items()}


def memory_side(task_groups: dict[str, str], protocol: str, seed: int) -> set[str]:
    """The units (groups or task ids) of a cross split's memory side."""
    return set(split_units(task_units(task_groups, protocol).values(), seed)[0])


def eval_task_ids(bank_dir, protocol: str, seed: int = 0, task_groups: Mapping[str, str] | None = None) -> list[str]:
    """The held-out tasks a cross split must evaluate on: those whose unit is on the evaluation side. `task_groups`:
    the benchmark's exclusion groups now, over those the bank was built with (as the run's hooks take them)."""
    groups = bank_task_groups(bank_dir)
    units = task_units({task: (task_groups or {}).get(task, group) for task, group in groups.items()}, protocol)
    held_out = set(split_units(units.values(), seed)[1])
    return sorted(task for task, unit in units.items() if unit in held_out)
