"""Load run files into one table: a row per run, its cell (from the results layout) and its scores."""

import re
from collections.abc import Mapping
from typing import Any

import pandas as pd

from amd.analysis.cost import run_cost
from amd.analysis.layout import describe_run
from amd.analysis.retrieval import run_retrieval
from amd.analysis.score import run_metrics
from amd.core.errors import AmdError
from amd.core.registry import load_target
from amd.core.schema import expected_tasks, read_run
from amd.core.trajectory import TrajectoryRecord
from amd.core.vocabulary import bank_settings, run_method

BASE_COLUMNS = ("benchmark", "student", "teacher", "writer", "embedder", "build", "memcfg", "variant", "protocol")


def cell_columns() -> tuple[str, ...]:
    """A run's cell, as its path names it: where it ran, with what memory (`build`: the names of its bank's settings,
    amd.analysis.layout; `variant`: the harness variant it ran, None for the release's), and the bank's value of
    each setting by its key."""
    return (*BASE_COLUMNS, *(setting.key for setting in bank_settings()))


def model_name(record: Mapping[str, Any]) -> str:
    """The model behind a run, without transport: 'vllm:Qwen/Qwen3-4B@http://..' -> 'Qwen/Qwen3-4B'."""
    agent = record["agent"]
    spec = agent.get("model") or agent["spec"]
    return re.sub(r"^(openai|vllm|local):", "", spec.split("@", 1)[0])


def summarize_run(path) -> dict:
    """One row: the run's cell plus success rate (%), mean steps, token totals over its tasks and its cost."""
    records = read_run(path)
    if not records:
        raise AmdError(f"{path}: run file has no tasks")
    metrics = run_metrics(records, expected_tasks(path))
    cost = run_cost(records, path)
    cell = describe_run(path)
    k = cell.pop("k", {})
    row = {column: cell.get(column) for column in cell_columns()}
    row |= {
        "path": str(path),
        "role": cell["role"],
        "seed": cell.get("seed"),
        "k": k,
        "k_text": ",".join(f"{t}={v}" for t, v in k.items()),
        "model": model_name(records[0]),
        "temperature": records[0]["agent"].get("params", {}).get("temperature"),  # None: not sent, or no model
        "oracle": records[0]["agent"]["kind"] == "oracle",
        # the task's step cap it ran under (None: not recorded, or an official turn loop that caps turns only)
        "step_cap": records[0].get("step_caps", {}).get("max_steps"),
        "n_tasks": metrics["tasks"],
        "missing": len(metrics["missing"]),
        "task_ids": frozenset(metrics["success_by_task"]),
        **{key: metrics[key] for key in ("successes", "success_rate", "strict_successes", "strict_rate", "mean_steps",
                                         "prompt_tokens", "completion_tokens", "success_by_task", "strict_by_task",
                                         "steps_by_task")},
        # every role's tokens (agent, memory, user simulator, the bank's writer) and their US dollars (amd.analysis.cost)
        "tokens": cost["tokens"], "cost_usd": cost["usd"],
        # under a prompt-injection attack, whether the attacker's goal was reached (benchmarks that record it)
        "security_by_task": {r["task_id"]: r["checker"]["security"] for r in records if "security" in r["checker"]},
        **method_columns(records),
        # per memory type: queries that found no entry at or above δ, injected similarities (amd.analysis.retrieval)
        "retrieval": run_retrieval(records),
        # memory pooled from several teachers (amd memory pool): its teachers, the preferred one, per-task sources
        "pool": records[0]["memory"].get("pool"),
    }
    if row["role"] == "other":
        row["benchmark"] = records[0]["benchmark"]
        row["memcfg"] = records[0]["memory"]["config"]
        row["protocol"] = records[0]["memory"].get("protocol")
    if row["role"] == "teacher":
        row["memcfg"] = "teacher"
    return row


def method_columns(records: list[TrajectoryRecord]) -> dict:
    """The columns the run's memory method computes for its own tables (its spec's `detail_columns`), e.g. what its
    variants record beside their injections; none for a run without memory."""
    spec = run_method(records[0]["memory"])
    return load_target(spec.detail_columns)(records) if spec and spec.detail_columns else {}


def load_runs(paths) -> pd.DataFrame:
    if not paths:
        raise AmdError("no run files given (--runs)")
    return pd.DataFrame([summarize_run(path) for path in paths])


def restrict_to_tasks(row: pd.Series, task_ids) -> pd.Series:
    """The same run scored on a subset of its tasks (e.g. the cross_split evaluation side)."""
    kept = [t for t in row["success_by_task"] if t in task_ids]
    if not kept:
        return row
    row = row.copy()
    row["n_tasks"] = len(kept)
    row["successes"] = sum(row["success_by_task"][t] for t in kept)
    row["success_rate"] = 100.0 * row["successes"] / len(kept)
    row["strict_successes"] = sum(row["strict_by_task"][t] for t in kept)
    row["strict_rate"] = 100.0 * row["strict_successes"] / len(kept)
    steps = [row["steps_by_task"][t] for t in kept if t in row["steps_by_task"]]  # missing tasks took none
    row["mean_steps"] = sum(steps) / max(len(steps), 1)
    return row
