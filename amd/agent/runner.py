"""Run many tasks: bounded concurrency, durable per-task output, resume, progress; and which tasks a probe runs.

Each finished task is appended to the output and fsynced at once, so a crash or SIGKILL loses at most the tasks in
flight. Rerunning the same command resumes: finished tasks are skipped, a truncated last line is dropped, no task
is written twice. When every task is done the file is rewritten in task order in one atomic rename.

A memory whose bank changes as tasks finish (online memory) runs its tasks one at a time in task order, and a
crash stops the run there, so a rerun resumes in the same order and every task sees what its predecessors left.

A run may also be seeded from another copy of its output (`seed_from`: a release's, on a machine that has no
results/ of its own): before it starts, an output holding no finished task gets that copy's whole, valid records of
the same run (benchmark, agent and memory setting) as they are, so none of their tasks is asked of a model again.
"""

import hashlib
import json
import logging
import threading
import traceback
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from amd.agent.base import Agent
from amd.agent.hooks import MemoryHooks, RunContext, TaskContext
from amd.agent.loop import Limits, run_episode
from amd.agent.progress import PROGRESS_EVERY_S, Progress
from amd.benchmarks.base import Benchmark, Episode
from amd.benchmarks.duplicates import exclusion_groups
from amd.core.errors import AmdError
from amd.core.files import DISK_FULL, atomic_file, whole_lines
from amd.core.schema import RunFile, drop_truncated_tail, parse_line, read_run, write_expected_tasks
from amd.core.trajectory import SCHEMA_NAME, TrajectoryRecord, same_setting
from amd.core.vocabulary import AGENT_PARAM_DEFAULTS, run_method
from amd.llm.base import ModelUnreachable

log = logging.getLogger("amd.run")
INTERRUPT_GRACE_S = 10  # how long an interrupted run waits for its tasks in flight


@dataclass
class RunSpec:
    """Everything that identifies a run; stored in every record it writes."""

    benchmark: Benchmark
    agent_info: dict[str, Any]
    make_agent: Callable[[Episode], Agent]
    memory: MemoryHooks | None = None
    memory_info: dict[str, Any] = field(default_factory=lambda: {"config": "zero_shot", "bank": None})
    limits: Limits = field(default_factory=Limits)


@dataclass
class RunSummary:
    finished: int = 0
    skipped: int = 0
    crashed: list[str] = field(default_factory=list)
    disk_full: OSError | None = None  # what stopped the run: no task can be written
    unreachable: ModelUnreachable | None = None  # what stopped the run: a model (agent, user, memory) is gone


def run_tasks(spec: RunSpec, task_ids: list[str], out_path, concurrency: int = 1,
              progress: bool = True, progress_every_s: float = PROGRESS_EVERY_S, seed_from=None) -> RunSummary:
    Path(out_path).parent.mkdir(parents=True, exist_ok=True)
    if seed_from is not None:
        seed_output(spec, task_ids, Path(seed_from), Path(out_path))
    finished_records = _finished_records(spec, out_path)
    done = {record["task_id"] for record in finished_records}
    todo = [task_id for task_id in task_ids if task_id not in done]
    if todo:
        spec.benchmark.check_runnable()
    write_expected_tasks(out_path, spec.benchmark.name, task_ids)
    summary = RunSummary(skipped=len(task_ids) - len(todo))
    if summary.skipped:
        log.info("resuming %s: %d of %d tasks already finished", out_path, summary.skipped, len(task_ids))
    header = {"schema": SCHEMA_NAME, "benchmark": spec.benchmark.name,
              "data_version": spec.benchmark.data_version(), "agent": spec.agent_info, "memory": spec.memory_info}
    groups = exclusion_groups(spec.benchmark)  # a task's group in its record: the leakage protocols' unit
    write_lock = threading.Lock()
    shown = Progress(len(task_ids), summary.skipped, show=progress, every_s=progress_every_s)

    def run_one(task_id: str) -> None:
        episode = spec.benchmark.start(task_id)
        try:
            agent = spec.make_agent(episode)
            chat = agent.student_chat()
            student = CountedChat(chat) if chat else None
            group = groups.group(task_id, spec.benchmark.task_group(task_id))
            task = TaskContext(task_id, group, episode.instruction, student,
                               spec.agent_info.get("params", {}).get("seed"), episode.known_turns(),
                               [tool["function"]["name"] for tool in episode.tools])
            record: dict[str, Any] = {**header, **run_episode(agent, episode, spec.limits, task, spec.memory,
                                                               on_step=shown.step)}
            if spec.memory is not None and student is not None:
                record["memory_calls"] = student.usage
        finally:
            episode.close()
        if spec.memory is not None:
            spec.memory.episode_end(task, record)
        with write_lock:
            run_file.append(record)

    in_order = spec.memory is not None and spec.memory.one_task_at_a_time
    if in_order and concurrency > 1:
        log.warning("memory %s changes as tasks finish: its tasks run one at a time, in task order "
                    "(--concurrency %d not used)", spec.memory_info["config"], concurrency)
        concurrency = 1
    if spec.memory is not None:
        spec.memory.run_start(RunContext(spec.benchmark, Path(out_path), list(task_ids), finished_records))
    run_file = RunFile(out_path)
    try:
        _run_queue(run_one, todo, concurrency, summary, shown, stop_at_crash=in_order)
        if summary.crashed:
            run_file.keep()  # removed or replaced after the last append: rewritten from what this run holds
        else:
            _rewrite_in_task_order(run_file, task_ids)
    finally:
        run_file.close()
        shown.close()
        if spec.memory is not None:
            spec.memory.run_end()
    if summary.disk_full is not None:
        error = summary.disk_full
        raise AmdError(f"{error.filename or out_path}: {error.strerror}; the run stopped there, keeping the "
                       f"{summary.skipped + summary.finished} tasks written: free space and rerun the same command "
                       "to resume")
    if summary.unreachable is not None:
        raise AmdError(f"{summary.unreachable}; the run stopped, keeping the {summary.skipped + summary.finished} "
                       f"of {len(task_ids)} tasks with a verdict: rerun when it answers to finish the rest")
    return summary


def _run_queue(run_one, todo: list[str], concurrency: int, summary: RunSummary, shown: Progress,
               stop_at_crash: bool) -> None:
    """Run `todo` on a pool. Interrupted (SIGINT, SIGTERM), it starts no task, waits up to INTERRUPT_GRACE_S for
    those in flight to end and be written, and leaves the others unwritten: a model that never answers cannot hold
    the run (SLURM sends SIGKILL 30 s after SIGTERM by default)."""
    pool = ThreadPoolExecutor(max_workers=max(1, concurrency))
    pending: dict[Future[None], str] = {}
    try:
        _fill_and_wait(pool, pending, run_one, todo, concurrency, summary, shown, stop_at_crash)
    except KeyboardInterrupt:
        if pending:
            log.warning("interrupted: waiting up to %d s for the %d tasks in flight", INTERRUPT_GRACE_S, len(pending))
            wait(pending, timeout=INTERRUPT_GRACE_S)
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()


def _fill_and_wait(pool: ThreadPoolExecutor, pending: dict[Future[None], str], run_one, todo: list[str],
                   concurrency: int, summary: RunSummary, shown: Progress, stop_at_crash: bool) -> None:
    queue = list(todo)
    ended, crashed = 0, 0  # tasks that ended at the last wait, and of them those that crashed
    while queue or pending:
        while queue and len(pending) < max(1, concurrency):
            task_id = queue.pop(0)
            pending[pool.submit(run_one, task_id)] = task_id
        shown.tasks(ended, crashed, len(pending))  # after the refill: in flight counts the next tasks
        finished, _ = wait(pending, return_when=FIRST_COMPLETED)
        crashed_before = len(summary.crashed)
        for future in finished:
            task_id = pending.pop(future)
            _account(future, task_id, summary)
        if (summary.disk_full or summary.unreachable) and queue:
            queue.clear()  # no task could be written, or none could get a verdict: stop at once
        if stop_at_crash and summary.crashed and queue:
            log.error("stopping before %d tasks: the memory changes in task order, so the run resumes at the "
                      "crashed task when rerun", len(queue))
            queue.clear()
        ended, crashed = len(finished), len(summary.crashed) - crashed_before
    shown.tasks(ended, crashed, 0)


class CountedChat:
    """The student's chat as a memory method sees it, counting what the method asks of it in one task (the
    trajectory's `memory_calls`: a cost the steps do not show)."""

    def __init__(self, chat):
        self._chat = chat
        self._lock = threading.Lock()
        self.usage = {"replies": 0, "requests": 0, "prompt": 0, "completion": 0}

    def __call__(self, *args, **kwargs):
        reply = self._chat(*args, **kwargs)
        with self._lock:
            for key in self.usage:
                self.usage[key] += int(reply.usage()[key])
        return reply


def _account(future, task_id: str, summary: RunSummary) -> None:
    error = future.exception()
    if error is None:
        summary.finished += 1
        return
    # A task that crashed is not written: rerunning the command retries it. The run goes on, unless the disk is full
    # or a model cannot be reached (its error names the server).
    summary.crashed.append(task_id)
    if isinstance(error, ModelUnreachable):
        summary.unreachable = summary.unreachable or error
        return
    if isinstance(error, OSError) and error.errno in DISK_FULL:
        summary.disk_full = summary.disk_full or error
        return
    detail = "".join(traceback.format_exception(error))
    log.error("task %s crashed and was not written; rerun to retry it:\n%s", task_id, detail)


def _finished_records(spec: RunSpec, out_path) -> list[TrajectoryRecord]:
    if not Path(out_path).exists():
        return []
    dropped = drop_truncated_tail(out_path)
    if dropped:
        log.warning("%s: dropped its unterminated last line (%d bytes), a record cut off mid-write; that task runs "
                    "again", out_path, dropped)
    records = read_run(out_path)
    for record in records:
        for key, stored, expected in (("agent", record["agent"], spec.agent_info),
                                      ("memory", record["memory"], spec.memory_info)):
            if not _same_setting(key, stored, expected):
                raise AmdError(f"{out_path} holds a different run ({key} {stored} here, {expected} asked); "
                               "choose another --out")
    return records


def seed_output(spec: RunSpec, task_ids: list[str], source: Path, out_path: Path) -> int:
    """Copy `source`'s whole, valid records of this run and of its tasks into `out_path`, which holds no finished
    task (else it resumes itself and `source` is not read); how many were copied. A memory that runs one task at a
    time takes the first tasks in task order only, as far as it can resume them (MemoryHooks.seed)."""
    if whole_lines(out_path):
        log.info("%s holds finished tasks of its own: it resumes from them, not from %s", out_path, source)
        return 0
    if not source.exists():
        log.info("%s: no such file, so nothing is seeded (a release that has none of this run yet)", source)
        return 0
    chosen: dict[str, bytes] = {}
    records: dict[str, TrajectoryRecord] = {}
    other_setting = 0
    for number, line in enumerate(whole_lines(source), start=1):
        record = parse_line(line, source, number) if line.strip() else None
        if record is None or record["task_id"] not in task_ids or record["task_id"] in chosen:
            continue
        if not _same_run(spec, record):
            other_setting += 1
            continue
        chosen[record["task_id"]], records[record["task_id"]] = line, record
    order = [task_id for task_id in task_ids if task_id in chosen]
    if spec.memory is not None and spec.memory.one_task_at_a_time:
        order = order[: next((i for i, task_id in enumerate(order) if task_id != task_ids[i]), len(order))]
    if spec.memory is not None and order:
        order = order[: spec.memory.seed(source, out_path, [records[task_id] for task_id in order])]
    if order:
        with atomic_file(out_path, "wb") as handle:
            handle.writelines(chosen[task_id] for task_id in order)
    log.info("seeded %s with %d finished tasks of %s", out_path, len(order), source)
    if other_setting:
        log.warning("%s: %d records of this run's tasks are of another setting (benchmark, agent or memory, e.g. "
                    "another bank): not seeded, their tasks run again", source, other_setting)
    if len(order) < len(chosen):
        log.warning("%s: %d finished tasks not seeded: the run's memory changes in task order and cannot resume "
                    "past task %d", source, len(chosen) - len(order), len(order))
    return len(order)


def _same_run(spec: RunSpec, record: TrajectoryRecord) -> bool:
    return (record["benchmark"] == spec.benchmark.name and _same_setting("agent", record["agent"], spec.agent_info)
            and _same_setting("memory", record["memory"], spec.memory_info))


def _same_setting(key: str, stored: Any, asked: dict[str, Any]) -> bool:
    """Whether a record's agent or memory is the one asked for, a setting at its default left out or written."""
    if key == "agent":
        return {**stored, "params": None} == {**asked, "params": None} and same_setting(
            stored.get("params", {}), asked.get("params", {}), AGENT_PARAM_DEFAULTS)
    method = run_method(asked)
    return same_setting(stored, asked, method.record_defaults if method else {})


def _rewrite_in_task_order(run_file: RunFile, task_ids: list[str]) -> None:
    """The lines this run holds, in task order, in one rename. Each record was validated once, when appended or when
    read on resume; the rewrite only reorders lines."""
    order = {task_id: index for index, task_id in enumerate(task_ids)}
    run_file.rewrite(sorted(run_file.lines, key=lambda line: order.get(json.loads(line)["task_id"], len(order))))


def probe_tasks(task_ids: list[str], size: int, seed: int) -> list[str]:
    """`size` of `task_ids`, the same on any machine: the tasks with the smallest sha256 of "seed:task id", in
    their benchmark order. A task's place does not depend on the others, so a larger pool or size keeps the set."""
    if size < 1:
        raise AmdError(f"--probe-size must be at least 1, got {size}")
    if size > len(task_ids):
        raise AmdError(f"--probe-size {size} is more than the {len(task_ids)} tasks selected")
    chosen = set(sorted(task_ids, key=lambda task: hashlib.sha256(f"{seed}:{task}".encode()).hexdigest())[:size])
    return [task for task in task_ids if task in chosen]
