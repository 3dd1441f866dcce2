"""`amd probe`: the teacher–student fit probe, a cheap estimate, before the grid, of which teacher's memory suits a
student.

A probe run is an ordinary `amd run` (same runner, same trajectory records, same leakage protocols) of the student
with one teacher's memory, on a small fixed probe set of the tasks: `--probe-size N` drawn by `--probe-seed`, or a
fixed `--tasks` list. Probe runs with each teacher's bank are ranked, and checked against the full grid where it
has run, by the `probe_fit` table (amd.analysis.teachers).
"""

import logging

from amd.agent.runner import probe_tasks
from amd.core.errors import AmdError

log = logging.getLogger("amd.cli.probe")


def register(subparsers) -> None:
    from amd.cli.run import add_run_arguments

    probe = subparsers.add_parser("probe", help="the teacher-student fit probe: `amd run` on a small fixed set of "
                                  "the selected tasks (rank teachers with `amd table probe_fit`)")
    add_run_arguments(probe)
    probe.add_argument("--probe-size", type=int,
                       help="draw this many of the selected tasks (after --tasks, --limit and cross_split); "
                            "without it the probe set is the --tasks list itself")
    probe.add_argument("--probe-seed", type=int, default=0, help="seed of the draw (default 0)")
    probe.set_defaults(handler=probe_from_args)


def probe_from_args(args) -> int:
    from amd.cli.run import run_from_args

    if args.probe_size is None and not args.tasks:
        raise AmdError("amd probe needs --probe-size N (a draw from the selected tasks) or a fixed --tasks list")

    def choose(task_ids: list[str]) -> list[str]:
        chosen = task_ids if args.probe_size is None else probe_tasks(task_ids, args.probe_size, args.probe_seed)
        log.info("probe set: %d of %d tasks: %s", len(chosen), len(task_ids), ", ".join(chosen))
        return chosen

    return run_from_args(args, choose)
