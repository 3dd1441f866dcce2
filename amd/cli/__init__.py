"""The `amd` command line. Every Snakemake rule is one call of it.

Each command is a module of this package with `register(subparsers)` (its parser, its handler as `handler`) and is
named once in COMMANDS; the flag-value parsers that commands share are in amd.cli.arguments. Adding a command is a
module and a line in COMMANDS.

  amd run BENCHMARK --agent SPEC --out FILE.jsonl [...]      amd.cli.run: an agent on a benchmark's tasks
  amd probe BENCHMARK ... --probe-size N                     amd.cli.probe: `amd run` on a small fixed probe set
  amd score FILE.jsonl [...] [--json OUT] [--recheck]        amd.cli.score
  amd memory build|pool|show|query ...                       amd.cli.memory
  amd table|figure|view|groups ...                           amd.cli.table, .figure, .view, .groups
  amd serve-batch ... --job LOG CMD                          amd.cli.serve: a vLLM server and its batch's jobs
  amd serve-run --model M -- CMD                             amd.cli.serve: a command against a server of its own
  amd plan [--estimate] --configfile F                       amd.cli.plan: the grid's jobs and what they would cost
  amd release sync --configfile F | check DIR                amd.cli.release: a config's outputs as a release
"""

import argparse
import contextlib
import logging
import os
import signal
import sys
import threading
from pathlib import Path

from amd.core.errors import AmdError
from amd.core.files import DISK_FULL, log_kept, sole_writer
from amd.core.registry import load_target
from amd.core.text import printable


def main(argv: list[str] | None = None) -> int:
    from amd.workflow.serve import drop_zero_threads

    drop_zero_threads()  # before any library reads them: libgomp warns about a 0
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(PrintableFormatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    for noisy in ("httpx", "httpx2", "openai"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        with _sigterm_as_interrupt(), log_kept():
            return _main(args)
    except Terminated:
        print("amd: terminated (SIGTERM); finished tasks are kept, rerun the same command to resume", file=sys.stderr)
        return _leave_stuck_threads(128 + signal.SIGTERM)
    except KeyboardInterrupt:
        print("amd: interrupted; finished tasks are kept, rerun the same command to resume", file=sys.stderr)
        return _leave_stuck_threads(130)


def _leave_stuck_threads(code: int) -> int:
    """`code`, or an exit with it at once where a task's thread is still waiting on a model that does not answer:
    locks, servers and files are already released and closed, and Python would otherwise wait for that thread."""
    stuck = [thread for thread in threading.enumerate()
             if thread is not threading.main_thread() and not thread.daemon and thread.is_alive()]
    if stuck:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


class Terminated(KeyboardInterrupt):
    """SIGTERM (what Snakemake, SLURM and `kill` send), met as SIGINT is: in-flight tasks end, locks are released."""


def _terminate(signum, frame):
    raise Terminated()


@contextlib.contextmanager
def _sigterm_as_interrupt():
    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        yield
        return
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _main(args) -> int:
    try:
        check_outputs(args)
        with contextlib.ExitStack() as held:
            for output in outputs(args):
                held.enter_context(sole_writer(output, command_name(args)))
            return int(args.handler(args) or 0)
    except AmdError as exc:
        print(f"amd: error: {printable(exc)}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader closed the pipe (`amd memory show BANK | head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:
        if exc.errno not in DISK_FULL:
            raise
        print(f"amd: error: {exc.filename or 'an output'}: {exc.strerror}; what was written before is kept: free "
              "space and rerun the same command", file=sys.stderr)
        return 2


class PrintableFormatter(logging.Formatter):
    """Log lines carry task ids, paths and model text: their control characters are shown, not sent."""

    def format(self, record: logging.LogRecord) -> str:
        return printable(super().format(record))


def outputs(args) -> list[str]:
    """What a command writes, each held by one writer at a time: its --out (one path, or several), and score's
    --json."""
    return _paths(args, ("out", "json"))


INPUTS = ("files", "trajectories", "banks", "runs", "run", "against", "bank", "memory", "configfile")


def inputs(args) -> list[str]:
    """What a command reads: run files, trajectories, banks, config files (whichever of these flags it has)."""
    return _paths(args, INPUTS)


def _paths(args, names) -> list[str]:
    named = [getattr(args, name, None) for name in names]
    return sorted({path for value in named if value for path in ([value] if isinstance(value, str) else value)})


def check_outputs(args) -> None:
    """Refuse, before anything is locked or written, an output that is one of the command's inputs, holds one or
    lies inside one (links resolved), and an output the command may not write there: a file output that is a
    folder, or what `check_output` (set by a command that writes folders) refuses."""
    read = {Path(os.path.realpath(path)): path for path in inputs(args)}
    for output in outputs(args):
        real = Path(os.path.realpath(output))
        for path, given in read.items():
            if real == path or path.is_relative_to(real) or real.is_relative_to(path):
                how = "is" if real == path else "holds" if path.is_relative_to(real) else "lies inside"
                raise AmdError(f"output {output!r} {how} the input {given!r} of the same command: writing it would "
                               "destroy what is read; choose another output")
        getattr(args, "check_output", _file_output)(output)


def _file_output(output: str) -> None:
    from amd.memory.bank import is_bank

    if Path(output).is_dir() or not output.strip():
        raise AmdError(f"output {output!r} is a folder, not a file: name the file to write")
    folder = Path(os.path.realpath(output)).parent
    if is_bank(folder):
        raise AmdError(f"output {output!r} lies inside the memory bank {str(folder)!r}, whose files its manifest "
                       "checks (and a rebuild replaces whole): write it elsewhere")


def command_name(args) -> str:
    return " ".join(["amd", args.command, *([args.memory_command] if getattr(args, "memory_command", None) else [])])


# One module per command, registered in this order (the order `amd --help` lists them in).
COMMANDS = ("amd.cli.run", "amd.cli.score", "amd.cli.memory", "amd.cli.table", "amd.cli.figure", "amd.cli.view",
            "amd.cli.groups", "amd.cli.serve", "amd.cli.probe", "amd.cli.plan", "amd.cli.release")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="amd", description="Agent Memory Distillation pipeline")
    commands = parser.add_subparsers(dest="command", required=True)
    for module in COMMANDS:
        load_target(f"{module}:register")(commands)
    return parser
