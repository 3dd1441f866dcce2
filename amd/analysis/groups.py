"""`amd groups BENCHMARK`: the exclusion groups that join several of a benchmark's own task groups because their
tasks are duplicates (amd.benchmarks.duplicates), and, with `--audit RUN...`, the self-exclusion audit of memory
runs: how many injections came from the task itself, from its own task group, or from a duplicate of it in another
task group. Under `self_excluded` the last two are 0; under `self_excluded_task` only the first is."""

import json
from collections import Counter
from pathlib import Path
from typing import Any

from amd.analysis.retrieval import injections
from amd.benchmarks.duplicates import ExclusionGroups
from amd.core.files import atomic_file
from amd.core.trajectory import TrajectoryRecord

SOURCES = ("itself", "task_group", "duplicate", "other")  # where an injection came from, seen from its task


def merged_groups(found: ExclusionGroups) -> dict[str, dict[str, Any]]:
    """Exclusion group -> the task groups it joins, its tasks and the duplicate pairs that joined them."""
    merged = {}
    for group, owns in found.merged().items():
        tasks = [task for task, joined in found.groups.items() if joined == group]
        links = [vars(link) for link in found.links if found.groups[link.first] == group]
        merged[group] = {"task_groups": owns, "tasks": tasks, "links": links}
    return merged


def summary(benchmark: str, found: ExclusionGroups) -> dict[str, Any]:
    """What `amd groups` prints and writes (--json)."""
    merged = merged_groups(found)
    return {"benchmark": benchmark, "tasks": len(found.groups), "task_groups": len(set(found.own.values())),
            "exclusion_groups": len(set(found.groups.values())), "merged": merged}


def summary_lines(found: dict[str, Any]) -> list[str]:
    joined = sum(len(group["task_groups"]) for group in found["merged"].values())
    head = (f"{found['benchmark']}: {found['tasks']} tasks, {found['task_groups']} task groups, "
            f"{found['exclusion_groups']} exclusion groups ({len(found['merged'])} merged, joining {joined} task groups)")
    lines = [head]
    for group, item in found["merged"].items():
        why = "; ".join(f"{link['first']} ~ {link['second']}: same {link['reason']}" if link["reason"] != "instruction"
                        else f"{link['first']} ~ {link['second']}: instructions {link['similarity']} alike"
                        for link in item["links"])
        lines.append(f"  {group}: {', '.join(item['task_groups'])} ({why})")
    return lines


def audit(records: list[TrajectoryRecord], found: ExclusionGroups) -> Counter[str]:
    """Injections of memory runs by where they came from (SOURCES), the groups judged by the benchmark now."""
    counts: Counter[str] = Counter({source: 0 for source in SOURCES})
    for record in records:
        task = record["task_id"]
        for injection in injections(record):
            source = injection["source_task_id"]
            counts[_relation(task, source, found)] += 1
    return counts


def _relation(task: str, source: str, found: ExclusionGroups) -> str:
    if source == task:
        return "itself"
    if source in found.own and task in found.own and found.own[source] == found.own[task]:
        return "task_group"
    if source in found.groups and task in found.groups and found.groups[source] == found.groups[task]:
        return "duplicate"
    return "other"


def audit_line(path: Path, records: list[TrajectoryRecord], counts: Counter[str]) -> str:
    protocols = sorted({str(record["memory"].get("protocol", "none")) for record in records}) or ["none"]
    return (f"{path} ({'/'.join(protocols)}): {sum(counts.values())} injections; from the task itself "
            f"{counts['itself']}, from its task group {counts['task_group']}, from a duplicate task "
            f"{counts['duplicate']}")


def write_json(path: str, found: dict[str, Any]) -> None:
    with atomic_file(path) as handle:
        handle.write(json.dumps(found, indent=1) + "\n")
