"""The `amd` command line. Every Snakemake rule is one call of it.

  amd run BENCHMARK --agent SPEC --out FILE.jsonl [--tasks ID,...] [--limit N] [memory options] (amd.cli.run)
  amd score FILE.jsonl [...] [--json OUT] [--recheck]
  amd memory build|pool|show|query ... (amd.memory.cli)
  amd table|figure|view ...            (amd.analysis.cli)
  amd serve ... --url-file F           (amd.workflow.serve: a vLLM server for a batch of jobs, until terminated)
  amd serve-run ...                    (amd.workflow.serve: a command against that server, or one of its own)
  amd probe BENCHMARK ... --probe-size N (amd.cli.probe: `amd run` on a small fixed probe set of the tasks)
  amd plan [--estimate] --configfile F (amd.workflow.plan: the grid's runs and what they would cost)
  amd release sync --configfile F | check DIR (amd.workflow.release: a config's outputs as a checksummed release)
"""

import argparse
import contextlib
import importlib
import logging
import os
import sys

from amd.core.errors import AmdError
from amd.core.files import DISK_FULL, sole_writer
from amd.core.text import printable


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(PrintableFormatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    for noisy in ("httpx", "httpx2", "openai"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
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
    except KeyboardInterrupt:
        print("amd: interrupted; finished tasks are kept, rerun the same command to resume", file=sys.stderr)
        return 130


class PrintableFormatter(logging.Formatter):
    """Log lines carry task ids, paths and model text: their control characters are shown, not sent."""

    def format(self, record: logging.LogRecord) -> str:
        return printable(super().format(record))


def outputs(args) -> list[str]:
    """What a command writes, each held by one writer at a time: its --out (one path, or several), and score's
    --json."""
    named = [getattr(args, "out", None), getattr(args, "json", None)]
    return sorted({path for value in named if value for path in ([value] if isinstance(value, str) else value)})


def command_name(args) -> str:
    return " ".join(["amd", args.command, *([args.memory_command] if getattr(args, "memory_command", None) else [])])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="amd", description="Agent Memory Distillation pipeline")
    commands = parser.add_subparsers(dest="command", required=True)
    importlib.import_module("amd.cli.run").register(commands)
    _add_score(commands)
    for module in ("amd.memory.cli", "amd.analysis.cli", "amd.workflow.serve", "amd.cli.probe", "amd.workflow.plan",
                   "amd.workflow.release"):
        importlib.import_module(module).register(commands)
    return parser


def _add_score(commands) -> None:
    score = commands.add_parser("score", help="success rate, mean steps and tokens of run files")
    score.add_argument("files", nargs="+")
    score.add_argument("--json", help="also write the table as JSON here")
    score.add_argument("--recheck", action="store_true",
                       help="re-score every stored trajectory with the benchmark's own checker")
    score.set_defaults(handler=_score_command)


def _score_command(args) -> int:
    from amd.analysis.score import score_from_args

    return score_from_args(args)

