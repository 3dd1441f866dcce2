"""What a memory run's retrieval saw, per memory type: how often the minimum similarity δ left a query with no
entry, and how similar what was injected was. `amd score` prints it under each memory run; the `retrieval_delta`
table (amd.analysis.tables) gives it per cell, and Tables 1 and 2 a column of the share of queries left with none.

A run's records carry every retrieval query (`memory_queries`: entries found at or above δ, the best similarity
below it alike) and every injection with its similarity. Files written before `memory_queries` existed still give
the injected similarities; their query counts are unknown (None)."""

import statistics
from typing import Any

from amd.core.trajectory import InjectionRecord, TrajectoryRecord

TABLE_NOTE = ("queries: retrieval queries recorded (per type: workflow the instruction, subtask each decomposed label or "
        "user turn, function each failing function looked up by name, a baseline's its own); no_entry_%: the share "
        "that found no entry at or above δ (function memory, looked up by name: no record of the function); "
        "missed_best: the median best similarity of those queries (how far below δ they fell); injected: entries "
        "injected, with their similarity's median and range. Pooled over a cell's runs (seeds). A dash: not "
        "recorded (runs written before queries were).")
TEXT_NOTE = ("no entry ≥ δ (%): per memory type, the share of retrieval queries that found no entry at or above the "
             "minimum similarity δ (function memory: no record of a failing function); the retrieval_delta table "
             "has the similarities. A dash: not recorded.")


def run_retrieval(records: list[TrajectoryRecord]) -> dict:
    """Per memory type name: delta (None: no threshold), queries (None where the records have none recorded),
    no_entry (queries that found none), missed_best (their best similarities) and injected (the injected entries'
    similarities)."""
    stats: dict[str, Any] = {}
    delta = records[0]["memory"].get("delta", {}) if records else {}
    recorded = all("memory_queries" in record for record in records)

    def of(type_name: str) -> dict:
        return stats.setdefault(type_name, {"delta": delta.get(type_name), "queries": 0 if recorded else None,
                                            "no_entry": 0, "missed_best": [], "injected": []})

    for record in records:
        for query in record.get("memory_queries", []):
            item = of(query["type"])
            item["queries"] += 1
            if query["found"] == 0:
                item["no_entry"] += 1
                item["missed_best"] += [] if query["best"] is None else [query["best"]]
        for injection in injections(record):
            if injection.get("similarity") is not None:
                of(injection["type"])["injected"].append(injection["similarity"])
    return stats


def injections(record: TrajectoryRecord) -> list[InjectionRecord]:
    """Every injection of a record: at task start, per user turn, after errors."""
    found = list(record.get("system_memory", []))
    for turn in record["turns"]:
        found += turn.get("injected_memory", [])
        found += [item for step in turn["steps"] for item in step.get("injected_memory", [])]
    return found


def pooled(runs) -> dict:
    """The per-type stats of several runs (a cell's seeds) as one: counts summed (None if any run's is unknown),
    similarities joined, δ the runs' own (None where they differ)."""
    total: dict[str, Any] = {}
    for stats in runs:
        for type_name, item in stats.items():
            into = total.setdefault(type_name, {"delta": item["delta"], "queries": 0, "no_entry": 0,
                                                "missed_best": [], "injected": []})
            into["delta"] = into["delta"] if into["delta"] == item["delta"] else None
            into["queries"] = None if None in (into["queries"], item["queries"]) else into["queries"] + item["queries"]
            into["no_entry"] += item["no_entry"]
            into["missed_best"] += item["missed_best"]
            into["injected"] += item["injected"]
    return total


def summary(item: dict) -> dict:
    """One type's stats as numbers: queries, no_entry, no_entry_%, missed_best (median), injected and the median,
    min and max of their similarity (None where there is nothing to say)."""
    queries, injected = item["queries"], item["injected"]
    return {"delta": item["delta"], "queries": queries,
            "no_entry": None if queries is None else item["no_entry"],
            "no_entry_%": 100.0 * item["no_entry"] / queries if queries else None,
            "missed_best": _median(item["missed_best"]), "injected": len(injected),
            "injected_median": _median(injected), "injected_min": min(injected, default=None),
            "injected_max": max(injected, default=None)}


def _median(values: list) -> float | None:
    return statistics.median(values) if values else None


def report_lines(summaries: dict) -> list[str]:
    """`amd score`'s lines for one run, from each type's `summary`: δ, the queries and the share that found no
    entry, the injected similarities."""
    lines = []
    for type_name, numbers in summaries.items():
        delta = "none" if numbers["delta"] is None else f"{numbers['delta']:g}"
        if numbers["queries"] is None:
            found = "queries not recorded"
        else:
            found = f"{numbers['queries']} queries, {numbers['no_entry']} found no entry at or above δ"
            found += "" if numbers["no_entry_%"] is None else f" ({numbers['no_entry_%']:.1f} %)"
            if numbers["missed_best"] is not None:
                found += f", their best similarity median {numbers['missed_best']:.3f}"
        injected = f"{numbers['injected']} injected"
        if numbers["injected"]:
            injected += (f", similarity median {numbers['injected_median']:.3f} [{numbers['injected_min']:.3f}, "
                         f"{numbers['injected_max']:.3f}]")
        lines.append(f"  {type_name}: δ {delta}; {found}; {injected}")
    return lines


def no_entry_text(stats: dict) -> str | None:
    """'workflow 1.2, subtask 40.0': per type the % of queries that found no entry at or above δ (None: no memory,
    or nothing recorded)."""
    parts = [f"{type_name} {numbers['no_entry_%']:.1f}" for type_name, item in stats.items()
             if (numbers := summary(item))["no_entry_%"] is not None]
    return ", ".join(parts) or None
