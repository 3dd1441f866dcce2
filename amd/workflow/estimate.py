"""What each job of a config's grid would cost, before anything runs (`amd plan --estimate`).

Jobs are the grid's teacher runs, memory builds, student runs and probe runs (amd.workflow.grid). For each one,
--estimate gives the model replies it needs (one request each with an empty response cache; retries are not
foreseen), their prompt and completion tokens, US dollars for hosted models (`estimate.prices`) and GPU-hours for
the agents the workflow serves (`serve:`; amd.workflow.serving, from `estimate.gpu` and `estimate.models`), per job
on a server of its own and per plan of servers. A figure the config does not give is unknown, never guessed.

A run job's figures, per task, come from the first of these sources that has any (docs/guides/beyond-the-paper.md,
"Cost estimate"):
  run                     the job's own run file: a task finished there costs nothing more (a rerun skips it)
  same model and memory   the grid's other runs of the benchmark by the same model with the same memory config
  same model              ... by the same model, any memory config
  same memory             ... by other models with the same memory config
  benchmark               ... by any model
  config                  estimate.benchmarks.NAME: per-task figures the user gives
Within a source, a task it ran counts at its own mean, any other task at the source's mean per task. What the
memory method asks of the student beside the steps (the trajectory's `memory_calls`) comes with the sources that
share the memory config, and otherwise from any run of that config (the benchmark's first).
"""

import json
import logging
import math
from pathlib import Path
from typing import Any

import pandas as pd

from amd.analysis.cost import priced
from amd.analysis.runs import model_name
from amd.core.errors import AmdError
from amd.core.vocabulary import ZERO_SHOT
from amd.llm.specs import price_name
from amd.workflow.jobs import Job, TaskPools, grid_jobs
from amd.workflow.servers import server_gpus
from amd.workflow.serving import ServingModel, Work

log = logging.getLogger("amd.plan")

STEP = ("replies", "prompt", "completion", "cached_prompt")
MEMORY = ("memory_replies", "memory_prompt", "memory_completion")
SHARES_MEMORY = ("run", "same model and memory", "same memory")
NO_MODEL = "no model"
SUMMARY_COLUMNS = ["requests", "prompt_tokens", "completion_tokens", "usd", "gpu_hours", "requests_to_run",
                   "usd_to_run", "gpu_hours_to_run"]


class Statistics:
    """Per-task figures of every run of the grid that is on disk (one row per task record)."""

    def __init__(self, paths):
        rows = [_figures(path, record) for path in paths if Path(path).exists() for record in _records(path)]
        columns = ["path", "benchmark", "model", "memcfg", "task_id", *STEP, *MEMORY]
        self.frame = pd.DataFrame(rows, columns=columns)

    def sources(self, job: Job):
        """(label, rows) of each source of a run job's figures, most specific first."""
        frame, model = self.frame, model_name({"agent": {"spec": job.spec}})
        same_benchmark = frame["benchmark"] == job.benchmark
        same_model, same_memory = frame["model"] == model, frame["memcfg"] == job.memcfg
        yield "run", frame[frame["path"] == job.path]
        yield "same model and memory", frame[same_benchmark & same_model & same_memory]
        yield "same model", frame[same_benchmark & same_model]
        yield "same memory", frame[same_benchmark & same_memory]
        yield "benchmark", frame[same_benchmark]

    def memory_rows(self, job: Job) -> pd.DataFrame:
        measured = self.frame[(self.frame["memcfg"] == job.memcfg) & self.frame["memory_replies"].notna()]
        here = measured[measured["benchmark"] == job.benchmark]
        return here if len(here) else measured


def _records(path) -> list[dict]:
    """A run file's records; a line that does not parse (a run writing it now) is left out, with a warning."""
    records = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            log.warning("%s:%d: not a whole record (a run still writing?); left out of the statistics", path, number)
    return records


def _figures(path, record: dict) -> dict:
    memory = record.get("memory_calls")
    return {"path": str(path), "benchmark": record["benchmark"], "model": model_name(record),
            "memcfg": record["memory"]["config"], "task_id": record["task_id"], "replies": record["n_steps"],
            "prompt": record["tokens"]["prompt"], "completion": record["tokens"]["completion"],
            "cached_prompt": record["tokens"].get("cached_prompt", 0),
            **{f"memory_{key}": memory[key] if memory else math.nan for key in ("replies", "prompt", "completion")}}


def estimate(grid, extra_runs=()) -> tuple[pd.DataFrame, list[str]]:
    """Every job's row and the notes on what is unknown; `extra_runs` add per-task figures (pilot runs)."""
    pools = TaskPools(grid)
    jobs = grid_jobs(grid, pools)
    missing = [path for path in extra_runs if not Path(path).exists()]
    if missing:
        raise AmdError(f"--runs: no such run file: {', '.join(missing)}")
    statistics = Statistics([job.path for job in jobs if job.kind != "bank"] + list(extra_runs))
    pricing = Pricing(grid)
    rows = [pricing.row(job, *_bank_figures(job, jobs) if job.kind == "bank" else _run_figures(job, statistics, grid))
            for job in jobs]
    notes = pools.notes + pricing.notes
    for benchmark, entry in grid.config["benchmarks"].items():
        if "user_model" in entry.get("options", {}):  # a benchmark with a user simulator
            notes.append(f"{benchmark}: its user simulator ({entry['options']['user_model']}) answers every user "
                         "turn; those requests are not recorded per task and not estimated here")
    if any(entry["spec"].startswith("openai:") for entry in grid.config["embedders"].values()):
        notes.append("embedding requests of memory builds and of retrieval queries are not counted")
    return pd.DataFrame(rows), list(dict.fromkeys(notes))


def _run_figures(job: Job, statistics: Statistics, grid) -> tuple[str, dict, dict, int]:
    """(source, figures of the whole job, figures of what is still to run, tasks done) of a run job."""
    if not grid.samples(grid.agent(job.agent)):
        return NO_MODEL, _zero(), _zero(), 0
    own = statistics.frame[statistics.frame["path"] == job.path]
    finished = own.groupby("task_id")[[*STEP, *MEMORY]].mean().fillna(0)
    label, rows = next(((label, rows) for label, rows in statistics.sources(job) if len(rows)), ("config", None))
    per_task, mean = _per_task(rows, job, statistics, label) if rows is not None else _configured(job, grid)
    left: list[Any]
    if job.tasks is not None:
        done = [task for task in job.tasks if task in finished.index]
        left = [task for task in job.tasks if task not in finished.index]
    elif job.n_tasks is not None:  # only a count: the file's tasks are done, the rest at the mean
        done, left = list(finished.index), [None] * max(0, round(job.n_tasks) - len(finished))
    else:
        return "unknown", {}, {}, len(finished)
    if left and mean is None:
        return "unknown", {}, {}, len(done)
    to_run: list[dict[str, Any]] = [per_task.get(task, mean) or {} for task in left]  # mean is set when any is left
    return label, _total([dict(finished.loc[task]) for task in done] + to_run), _total(to_run), len(done)


def _per_task(rows: pd.DataFrame, job: Job, statistics: Statistics, label: str) -> tuple[dict, dict]:
    """Per task and mean figures of a source; memory figures from the memory config's runs where the source does
    not share it."""
    rows = rows.copy()
    if job.memcfg == ZERO_SHOT:
        rows[list(MEMORY)] = 0
    elif label not in SHARES_MEMORY or rows["memory_replies"].isna().all():
        measured = statistics.memory_rows(job)
        rows[list(MEMORY)] = measured[list(MEMORY)].mean().fillna(0).to_numpy() if len(measured) else 0
    figures = rows[[*STEP, *MEMORY]].fillna(0)
    per_task = {task: dict(values) for task, values in figures.groupby(rows["task_id"]).mean().iterrows()}
    return per_task, dict(figures.mean())


def _configured(job: Job, grid) -> tuple[dict, dict | None]:
    """The per-task figures `estimate.benchmarks` gives for the benchmark, or (…, None) where it gives none."""
    given = grid.config.get("estimate", {}).get("benchmarks", {}).get(job.benchmark, {})
    replies, prompt, completion = (given.get(key) for key in ("replies_per_task", "prompt_tokens_per_reply",
                                                               "completion_tokens_per_reply"))
    if replies is None or prompt is None or completion is None:
        return {}, None
    new = given.get("new_prompt_tokens_per_reply", prompt)  # the rest a server's prefix cache holds
    return {}, {"replies": replies, "prompt": replies * prompt, "completion": replies * completion,
                "cached_prompt": replies * (prompt - new)} | dict.fromkeys(MEMORY, 0)


def _bank_figures(job: Job, jobs: list[Job]) -> tuple[str, dict, dict, int]:
    """A bank's writer replies and tokens: its manifest's where it is built, else the rate per source record of the
    plan's other banks of the same method written by a model."""
    if job.spec == "rules":
        return NO_MODEL, _zero(), _zero(), 0
    built = _writer_usage(job.path)
    if built is not None:
        return "run", _bank(built[0]), _zero(), built[1]
    measured = [usage for other in jobs if other.kind == "bank" and other.method == job.method
                and (usage := _writer_usage(other.path))]
    if not measured or job.n_tasks is None:
        return "unknown", {}, {}, 0
    records = sum(count for _, count in measured)
    figures = _bank({key: sum(usage[key] for usage, _ in measured) * job.n_tasks / records
                     for key in ("replies", "prompt", "completion")})
    return "same method", figures, figures, 0


def _writer_usage(bank: str) -> tuple[dict, int] | None:
    manifest = Path(bank) / "manifest.json"
    if not manifest.exists():
        return None
    content = json.loads(manifest.read_text())
    records = sum(source["records"] for source in content["sources"])
    return (content["writer_usage"], records) if "writer_usage" in content and records else None


def _bank(usage: dict) -> dict:
    """Writer usage as totals (writer replies count as requests)."""
    return {"requests": usage["replies"], "prompt": usage["prompt"], "completion": usage["completion"],
            "cached_prompt": 0}


def _zero() -> dict:
    return {"requests": 0, "prompt": 0, "completion": 0, "cached_prompt": 0}


def _total(figures: list[dict]) -> dict:
    total = {key: sum(f[key] for f in figures) for key in (*STEP, *MEMORY)}
    return {"requests": total["replies"] + total["memory_replies"],
            "prompt": total["prompt"] + total["memory_prompt"],
            "completion": total["completion"] + total["memory_completion"], "cached_prompt": total["cached_prompt"]}


class Pricing:
    """Dollars of hosted models (`openai:` specs) from `estimate.prices`, GPU-hours of served agents from the
    serving model (`estimate.gpu`, `estimate.models`) and their `serve.gpus`."""

    def __init__(self, grid):
        self.grid = grid
        self.prices = grid.config.get("estimate", {}).get("prices", {})
        self.serving = ServingModel(grid.config)
        self.notes: list[str] = []

    def row(self, job: Job, source: str, total: dict, to_run: dict, done: int) -> dict:
        served = self._served(job)
        return {"job": job.path, "kind": job.kind, "benchmark": job.benchmark, "agent": job.agent,
                "spec": job.spec, "memory": job.memcfg, "tasks": job.n_tasks, "tasks_done": done, "source": source,
                "requests": total.get("requests"), "prompt_tokens": total.get("prompt"),
                "completion_tokens": total.get("completion"), "cached_prompt_tokens": total.get("cached_prompt"),
                "usd": self.dollars(job.spec, total),
                "gpu_hours": self.gpu_hours(job, served, total), "requests_to_run": to_run.get("requests"),
                "usd_to_run": self.dollars(job.spec, to_run), "gpu_hours_to_run": self.gpu_hours(job, served, to_run)}

    def _served(self, job: Job) -> dict | None:
        entry = self.grid.writer(job.agent) if job.kind == "bank" else self.grid.agent(job.agent)
        return entry.get("serve")

    def dollars(self, spec: str, figures: dict) -> float | None:
        if not spec.startswith("openai:") or not figures.get("requests"):
            return 0.0 if figures else None
        listed = price_name(spec)
        price = self.prices.get(listed)
        if price is None or price["input"] is None or price["output"] is None:
            self.notes.append(f'no price for {listed}: fill in estimate.prices["{listed}"] (input, output USD per '
                              "million tokens and their source)")
            return None
        return priced(figures["prompt"], figures["cached_prompt"], figures["completion"], price["input"],
                      price.get("cached_input"), price["output"])

    def gpu_hours(self, job: Job, served: dict | None, figures: dict) -> float | None:
        """The job on a server of its own (amd.workflow.serving), its requests in flight its concurrency."""
        if served is None or not figures:
            return 0.0 if figures else None
        if not figures["requests"]:
            return 0.0
        missing = self.serving.missing(job.spec)
        if missing:
            self.notes.append(f"no GPU-hours for served agent {job.agent}: fill in {', '.join(missing)} (and their "
                              "source)")
            return None
        load = self.grid.servers.nodes[job.path].load if job.path in self.grid.servers.nodes else 1
        work = Work(figures["requests"], figures["prompt"], figures["cached_prompt"], figures["completion"], load)
        return self.serving.hours(job.spec, server_gpus(served), work)


def summarize(table: pd.DataFrame) -> pd.DataFrame:
    """Totals per model spec and over all (unknown figures left out of a sum, and counted in `unknown_jobs`)."""
    def totals(part: pd.DataFrame) -> dict:
        return {"jobs": len(part), "unknown_jobs": int(part["requests"].isna().sum()),
                **{column: part[column].sum(min_count=1) for column in SUMMARY_COLUMNS}}

    rows = [{"spec": spec, **totals(part)} for spec, part in table.groupby("spec", sort=False)]
    return pd.DataFrame(rows + [{"spec": "all", **totals(table)}])

