"""Several teachers, one bank: `amd memory pool` joins the banks that `amd memory build` made from each teacher's
trajectories (one method, one embedder) into one bank, and a run sees one teacher's memory per task.

Provenance: every entry keeps its fields and gains `source_teacher` (the teacher's name) and an id prefixed with
it (`gpt55/workflow:multi_turn_base_3:0`); the manifest's `sources` are the members' trajectory files with their
sha256 and teacher, and `pool.members` names each member bank with the sha256 of its manifest. Injection records
carry `source_teacher`.

Dedup across teachers (DEDUP_RULE): a task solved by several teachers keeps one teacher's entries. The bank stores
every teacher's entries; a run sees those of the first teacher in the priority order that solved the task, or,
for methods that also learn from failures, the first that has entries for it. The priority order is the pool's,
with the run option `prefer_teacher=NAME` moved to the front: a preference, not a filter, since tasks the preferred
teacher did not solve still bring another teacher's memory. The leakage protocols are unchanged: every entry keeps
its `source_task_id` and `source_group`, so a task never sees memory of its own group (or, under a task-level
protocol, of itself) from any teacher.
"""

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

import amd
from amd.core.errors import AmdError
from amd.memory.bank import Bank, BankContents, check_bank_out, load_bank, write_bank
from amd.memory.bank_schema import BANK_SCHEMA

DEDUP_RULE = ("per task, the entries of one teacher: the first in the priority order (the pool's, the preferred "
              "teacher first) that solved the task, else the first that has entries for it")
AGREE = ("method", "embedder", "dim", "types", "benchmarks", "delta")  # what the members of a pool must share
BUILT = {"schema", "amd_version", "method", "writer", "embedder", "dim", "sources", "agents", "benchmarks",
         "task_ids", "task_groups", "solved_task_ids", "types", "counts", "files", "delta"}  # every bank's own manifest fields
NAME = re.compile(r"^[A-Za-z0-9_]+$")


def pool_banks(bank_dirs: list, teachers: list[str], out_dir) -> dict:
    """The banks at `bank_dirs`, built from the runs of `teachers` (same order), pooled into one bank at `out_dir`;
    returns its manifest."""
    check_bank_out(out_dir)
    _check_teachers(bank_dirs, teachers)
    banks = [load_bank(path) for path in bank_dirs]
    for bank in banks:
        _check_member(bank, banks[0])
    groups = _task_groups(banks)
    types = banks[0].manifest["types"]
    entries = {t: [entry | {"id": f"{name}/{entry['id']}", "source_teacher": name}
                   for name, bank in zip(teachers, banks) for entry in bank.entries[t]] for t in types}
    vectors = {t: np.concatenate([bank.vectors(t) for bank in banks]) for t in types}
    manifests: list[dict[str, Any]] = [dict(bank.manifest) for bank in banks]  # the methods' own fields too
    members = {name: {"bank": str(bank.path), "bank_sha256": bank.manifest_sha256, "agents": bank.manifest["agents"],
                      "solved_task_ids": bank.manifest["solved_task_ids"], "counts": bank.manifest["counts"]}
               for name, bank in zip(teachers, banks)}
    pool = {"teachers": list(teachers), "rule": DEDUP_RULE, "members": members}
    default = chosen_teachers(pool, entries)
    pool |= {"default_teacher": dict(sorted(default.items())),
             "default_counts": {t: sum(default[e["source_task_id"]] == e["source_teacher"] for e in entries[t])
                                for t in types}}
    method_fields = {key for manifest in manifests for key in manifest} - BUILT
    manifest = {
        "schema": BANK_SCHEMA, "amd_version": amd.__version__, "method": manifests[0]["method"],
        "writer": {"spec": " + ".join(dict.fromkeys(m["writer"]["spec"] for m in manifests)),
                   "by_teacher": {name: m["writer"] for name, m in zip(teachers, manifests)}},
        "embedder": manifests[0]["embedder"], "dim": manifests[0]["dim"],
        "sources": [source | {"teacher": name} for name, m in zip(teachers, manifests) for source in m["sources"]],
        "agents": _union([m["agents"] for m in manifests]), "benchmarks": manifests[0]["benchmarks"],
        "task_ids": sorted(groups), "task_groups": dict(sorted(groups.items())),
        "solved_task_ids": sorted({task for m in manifests for task in m["solved_task_ids"]}),
        "types": types, "counts": {t: len(entries[t]) for t in types},
        "delta": manifests[0]["delta"],
        **{key: _merged([m[key] for m in manifests if key in m], key) for key in sorted(method_fields)},
        "pool": pool,
    }
    write_bank(Path(out_dir), manifest, BankContents(entries, {t: types[t]["embedded"] for t in types}), vectors)
    return manifest


def chosen_teachers(pool: dict, entries: dict, prefer: str | None = None) -> dict[str, str]:
    """task id -> the teacher whose entries of it a run sees (DEDUP_RULE), `prefer` first."""
    order = list(pool["teachers"])
    if prefer is not None:
        if prefer not in order:
            raise AmdError(f"prefer_teacher={prefer}: not a teacher of this pooled bank ({', '.join(order)})")
        order = [prefer] + [name for name in order if name != prefer]
    solved = {name: set(member["solved_task_ids"]) for name, member in pool["members"].items()}
    having: dict[str, set] = {}
    for type_entries in entries.values():
        for entry in type_entries:
            having.setdefault(entry["source_task_id"], set()).add(entry["source_teacher"])
    return {task: min(names, key=lambda name: (task not in solved[name], order.index(name)))
            for task, names in having.items()}


def pooled_view(bank: Bank, prefer: str | None) -> tuple[Bank, dict]:
    """The entries a run over a pooled bank sees, and what it records about them (its memory setting's `pool`)."""
    if "pool" not in bank.manifest:
        raise AmdError(f"{bank.path}: prefer_teacher={prefer} needs a bank pooled from several teachers "
                       "(amd memory pool); this one is one teacher's")
    pool = bank.manifest["pool"]
    chosen = chosen_teachers(pool, bank.entries, prefer)
    seen = bank.filtered(lambda entry: chosen[entry["source_task_id"]] == entry["source_teacher"])
    described = {"teachers": pool["teachers"], "prefer_teacher": prefer,
                 "tasks_by_teacher": {name: count for name, count in sorted(Counter(chosen.values()).items())},
                 "visible": {t: len(entries) for t, entries in seen.entries.items()}}
    return seen, described


def _check_teachers(bank_dirs: list, teachers: list[str]) -> None:
    if len(bank_dirs) != len(teachers):
        raise AmdError(f"{len(bank_dirs)} banks but {len(teachers)} teacher names; give one name per bank, in order")
    if len(teachers) < 2:
        raise AmdError("a pool needs the banks of at least two teachers")
    bad = [name for name in teachers if not NAME.match(name)]
    if bad:
        raise AmdError(f"teacher names must match [A-Za-z0-9_]+, got {bad}")
    repeated = sorted(name for name, count in Counter(teachers).items() if count > 1)
    if repeated:
        raise AmdError(f"teacher names must differ; repeated: {repeated}")


def _check_member(bank: Bank, first: Bank) -> None:
    manifest = bank.manifest
    if "pool" in manifest:
        raise AmdError(f"{bank.path}: already a pooled bank; pool the teachers' own banks instead")
    if "solved_task_ids" not in manifest:
        raise AmdError(f"{bank.path}: its manifest lacks solved_task_ids (built by an older amd); rebuild it with "
                       "`amd memory build`")
    for key in AGREE:
        if manifest.get(key) != first.manifest.get(key):
            raise AmdError(f"{bank.path}: {key} {json.dumps(manifest.get(key))} differs from {first.path}'s "
                           f"{json.dumps(first.manifest.get(key))}; the banks of a pool share method, embedder and "
                           "types")


def _task_groups(banks: list[Bank]) -> dict[str, str]:
    groups: dict[str, str] = {}
    for bank in banks:
        for task, group in bank.manifest["task_groups"].items():
            if groups.setdefault(task, group) != group:
                raise AmdError(f"{bank.path}: task {task} is in group {group!r} here but {groups[task]!r} in "
                               "another bank of the pool")
    return groups


def _union(lists: list[list]) -> list:
    """Items of all lists, each once, in first-seen order (items may be dicts)."""
    return [json.loads(text) for text in dict.fromkeys(json.dumps(item, sort_keys=True)
                                                       for items in lists for item in items)]


def _merged(values: list, key: str):
    """A method's own manifest field over the members: dicts by key, lists as their union, numbers (counts) summed,
    anything else must be the same in every member."""
    if all(isinstance(value, dict) for value in values):
        names = dict.fromkeys(name for value in values for name in value)
        return {name: _merged([v[name] for v in values if name in v], f"{key}.{name}") for name in names}
    if all(isinstance(value, list) for value in values):
        return _union(values)
    if all(isinstance(value, (int, float)) and not isinstance(value, bool) for value in values):
        return sum(values)
    if any(value != values[0] for value in values):
        raise AmdError(f"the banks of a pool disagree on {key}: {', '.join(json.dumps(v) for v in values)}")
    return values[0]
