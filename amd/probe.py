"""`amd probe`: the teacher–student fit probe, a cheap estimate, before the grid, of which teacher's memory suits a
student.

A probe run is an ordinary `amd run` (same runner, same trajectory records, same leakage protocols) of the student
with one teacher's memory, on a small fixed probe set of the tasks: `--probe-size N` drawn by `--probe-seed`, or a
fixed `--tasks` list. Probe runs with each teacher's bank are ranked, and checked against the full grid where it
has run, by the `probe_fit` table (amd.analysis.teachers).
"""

import hashlib
import logging

from amd.errors import AmdError

log = logging.getLogger("amd.probe")


def probe_tasks(task_ids: list[str], size: int, seed: int) -> list[str]:
    """`size` of `task_ids`, the same on any machine: the tasks with the smallest sha256 of "seed:task id", in
    their benchmark order. A task's place does not depend on the others, so a larger pool or size keeps the set."""
    if size < 1:
        raise AmdError(f"--probe-size must be at least 1, got {size}")
    if size > len(task_ids):
        raise AmdError(f"--probe-size {size} is more than the {len(task_ids)} tasks selected")
    chosen = set(sorted(task_ids, key=lambda task: hashlib.sha256(f"{seed}:{task}".encode()).hexdigest())[:size])
    return [task for task in task_ids if task in chosen]


def register(subparsers) -> None:
    from amd.run_cli import add_run_arguments

    probe = subparsers.add_parser("probe", help="the teacher-student fit probe: `amd run` on a small fixed set of "
                                  "the selected tasks (rank teachers with `amd table probe_fit`)")
    add_run_arguments(probe)
    probe.add_argument("--probe-size", type=int,
                       help="draw this many of the selected tasks (after --tasks, --limit and cross_split); "
                            "without it the probe set is the --tasks list itself")
    probe.add_argument("--probe-seed", type=int, default=0, help="seed of the draw (default 0)")
    probe.set_defaults(handler=probe_from_args)


def probe_from_args(args) -> int:
    from amd.run_cli import run_from_args

    if args.probe_size is None and not args.tasks:
        raise AmdError("amd probe needs --probe-size N (a draw from the selected tasks) or a fixed --tasks list")

    def choose(task_ids: list[str]) -> list[str]:
        chosen = task_ids if args.probe_size is None else probe_tasks(task_ids, args.probe_size, args.probe_seed)
        log.info("probe set: %d of %d tasks: %s", len(chosen), len(task_ids), ", ".join(chosen))
        return chosen

    return run_from_args(args, choose)
