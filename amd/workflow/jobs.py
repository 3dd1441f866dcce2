"""The jobs of a config's grid (amd.workflow.grid): every teacher run, memory build, student run and probe run
once, with the tasks each runs where they can be known before it runs."""

import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from amd.core.errors import AmdError
from amd.core.vocabulary import CROSS_SPLITS, ZERO_SHOT


@dataclass
class Job:
    path: str  # what the job makes: a run file or a bank folder
    kind: str  # teacher, bank, student, probe
    benchmark: str
    agent: str  # config name of who calls a model: the acting agent, or the bank's writer
    spec: str
    memcfg: str = ZERO_SHOT
    tasks: list[str] | None = None  # the task ids, where known
    n_tasks: float | None = None  # else how many (None: unknown)
    method: str | None = None  # a bank's memory method


class TaskPools:
    """The tasks of each job: the config's lists, else the benchmark's own listing (loaded once), else the count
    in `estimate.benchmarks`; probe sets drawn as `amd probe` draws them; a cross split's runs on its evaluation side."""

    def __init__(self, grid):
        self.grid, self.config = grid, grid.config
        self._listings: dict[tuple, list[str] | None] = {}
        self.notes: list[str] = []

    def listing(self, benchmark: str, agent: str) -> list[str] | None:
        """The benchmark's tasks under the agent's options for it."""
        options = self.grid.options(benchmark, agent)
        key = (benchmark, tuple(sorted(options.items())))
        if key not in self._listings:
            self._listings[key] = self._list(benchmark, options)
        return self._listings[key]

    def _list(self, benchmark: str, options: dict) -> list[str] | None:
        from amd.benchmarks.base import create_benchmark

        try:
            opened = create_benchmark(benchmark, **options)
            try:
                return opened.task_ids()
            finally:
                opened.close()
        except (AmdError, OSError, ImportError) as error:
            self.notes.append(f"{benchmark}: cannot list its tasks here ({error}); the task count comes from "
                              f"estimate.benchmarks.{benchmark}.tasks where given")
            return None

    def count(self, benchmark: str) -> int | None:
        return self.config.get("estimate", {}).get("benchmarks", {}).get(benchmark, {}).get("tasks")

    def tasks(self, benchmark: str, role: str, agent: str) -> tuple[list[str] | None, float | None]:
        listed = self.grid.tasks(benchmark, role, agent) or self.listing(benchmark, agent)
        return (listed, len(listed)) if listed else (None, self.count(benchmark))

    def student_tasks(self, cell: dict) -> tuple[list[str] | None, float | None]:
        from amd.agent.runner import probe_tasks
        from amd.memory.protocols import MEMORY_FRACTION, eval_task_ids

        tasks, count = self.tasks(cell["benchmark"], "student", cell["student"])
        if cell["method"] and cell["protocol"] in CROSS_SPLITS:
            bank = self.grid.bank_path(cell)
            if tasks is not None and os.path.exists(bank):
                held_out = set(eval_task_ids(bank, cell["protocol"], self.config["defaults"]["split_seed"]))
                tasks = [task for task in tasks if task in held_out]
                count = len(tasks)
            else:
                tasks, count = None, None if count is None else round(count * (1 - MEMORY_FRACTION))
        if cell["probe"]:
            probe = self.config["probe"]
            fixed = probe.get("tasks", {}).get(cell["benchmark"])
            if fixed:
                return fixed, len(fixed)
            if tasks is not None:
                chosen = probe_tasks(tasks, min(probe["size"], len(tasks)), probe["seed"])
                return chosen, len(chosen)
            return None, None if count is None else min(probe["size"], count)
        return tasks, count


def grid_jobs(grid, pools: TaskPools) -> list[Job]:
    """Every model-calling job of the grid once: teacher runs and banks of memory cells, every student run."""
    jobs: dict[str, Job] = {}
    for experiment in grid.config["experiments"]:
        for cell in grid.cells(experiment):
            benchmark = cell["benchmark"]
            for member in grid.distilled_teachers(cell["teacher"]) if cell["method"] else ():
                # a pool's bank joins its members' banks (no model calls): the members' runs and banks are the cost
                own = cell | {"teacher": member, "writer": member if cell["writer"] == cell["teacher"] else cell["writer"]}
                teacher_tasks, teacher_count = pools.tasks(benchmark, "teacher", member)
                teacher = grid.runs.teacher_run.format(**own)
                jobs.setdefault(teacher, Job(teacher, "teacher", benchmark, member, grid.agent(member)["spec"],
                                             tasks=teacher_tasks, n_tasks=teacher_count))
                bank = grid.bank_path(own)
                jobs.setdefault(bank, Job(bank, "bank", benchmark, own["writer"], grid.writer(own["writer"])["spec"],
                                          cell["method"], teacher_tasks, teacher_count, cell["method"]))
            path = grid.run_path(cell)
            tasks, count = pools.student_tasks(cell)
            jobs.setdefault(path, Job(path, "probe" if cell["probe"] else "student", benchmark, cell["student"],
                                      grid.agent(cell["student"])["spec"], cell["memcfg"], tasks, count))
    return list(jobs.values())


def job_table(jobs: list[Job]) -> pd.DataFrame:
    return pd.DataFrame([{"job": job.path, "kind": job.kind, "benchmark": job.benchmark, "agent": job.agent,
                          "spec": job.spec, "memory": job.memcfg, "tasks": job.n_tasks,
                          "status": _status(job)} for job in jobs])


def _status(job: Job) -> str:
    if job.kind == "bank":
        return "done" if (Path(job.path) / "manifest.json").exists() else "to run"
    if not Path(job.path).exists():
        return "to run"
    return run_status(job.path, job.spec, job.tasks)


def run_status(path: str, spec: str, tasks: list[str] | None) -> str:
    """A run file against what the config asks of it: "done" only when it is that agent's run of exactly those
    tasks (where they are known), every one with a verdict; "partial" when some lack one (`amd run` resumes it);
    "differs" when it is another run (other tasks or another model: the workflow runs it again)."""
    from amd.core.schema import expected_tasks, read_run

    try:
        records, asked = read_run(path), expected_tasks(path)
    except AmdError:
        return "differs"
    models = {_model_of(record["agent"]["spec"]) for record in records}
    if models - {_model_of(spec)} or (tasks is not None and asked is not None and asked != tasks):
        return "differs"
    wanted = tasks if tasks is not None else asked
    done = {record["task_id"] for record in records}
    return "done" if wanted is None or done >= set(wanted) else "partial"


def _model_of(spec: str) -> str:
    """A spec without the endpoint a served model was reached at (`vllm:MODEL@URL` in its run's records)."""
    return spec.split("@", 1)[0]


def job_counts(table: pd.DataFrame) -> pd.DataFrame:
    """Jobs and tasks per kind, model and status (a task count unknown where the benchmark cannot list its tasks)."""
    grouped = table.groupby(["kind", "spec", "status"], sort=False)
    return grouped.agg(jobs=("job", "size"), tasks=("tasks", lambda tasks: tasks.sum(min_count=1))).reset_index()

