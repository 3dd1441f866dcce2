"""The `amd` command line. Every Snakemake rule is one call of it.

  amd run BENCHMARK --agent SPEC --out FILE.jsonl [--tasks ID,...] [--limit N] [memory options]
  amd score FILE.jsonl [...] [--json OUT] [--recheck]
  amd memory build|pool|show|query ... (amd.memory.cli)
  amd table|figure NAME ...            (amd.analysis.cli)
  amd serve-run ...                    (amd.serve: a vLLM server that lives as long as one command)
  amd probe BENCHMARK ... --probe-size N (amd.probe: `amd run` on a small fixed probe set of the tasks)
  amd plan [--estimate] --configfile F (amd.workflow.plan: the grid's runs and what they would cost)
"""

import argparse
import contextlib
import importlib
import logging
import os
import sys

from amd.errors import AmdError
from amd.files import DISK_FULL, sole_writer
from amd.registry import AGENTS, BENCHMARKS
from amd.vocabulary import (
    PREFER_TEACHER,
    PROMPTING,
    PROTOCOLS,
    SELF_EXCLUDED,
    ZERO_SHOT,
    memory_configs,
    memory_type,
    memory_types,
    method_specs,
    option_flags,
)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s",
                        stream=sys.stderr)
    for noisy in ("httpx", "httpx2", "openai"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        with contextlib.ExitStack() as held:
            for output in outputs(args):
                held.enter_context(sole_writer(output, command_name(args)))
            return int(args.handler(args) or 0)
    except AmdError as exc:
        print(f"amd: error: {exc}", file=sys.stderr)
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
    _add_run(commands)
    _add_score(commands)
    for module in ("amd.memory.cli", "amd.analysis.cli", "amd.serve", "amd.probe", "amd.workflow.plan"):
        importlib.import_module(module).register(commands)
    return parser


def _add_run(commands) -> None:
    run = commands.add_parser("run", help="run an agent on benchmark tasks, one trajectory per task")
    add_run_arguments(run)
    run.set_defaults(handler=_run_command)


def add_run_arguments(run) -> None:
    """The flags of `amd run` (also those of `amd probe`, which runs the same way on a probe set)."""
    run.add_argument("benchmark", help=", ".join(
        entry.name + ("" if entry.target else " (declared)") for entry in BENCHMARKS.entries()))
    run.add_argument("--agent", required=True,
                     help=" | ".join([*(name for name in AGENTS.names() if name != "model"), "openai:MODEL",
                                      "vllm:MODEL@http://host:port/v1", "local:qwen2.5-coder-0.5b"]))
    run.add_argument("--out", required=True, help="trajectory file (JSONL); an existing one is resumed")
    run.add_argument("--benchmark-option", action="append", default=[], metavar="KEY=VALUE",
                     help="an option of the benchmark (each benchmark says which it takes)")
    run.add_argument("--user-model", metavar="SPEC",
                     help="the user simulator's model, for benchmarks that have one; the same as "
                          "--benchmark-option user_model=SPEC")
    run.add_argument("--tasks", help="comma-separated task ids (default: all)")
    run.add_argument("--limit", type=int, help="only the first N of the selected tasks")
    run.add_argument("--concurrency", type=int, default=1, help="tasks in flight at once (default 1)")
    run.add_argument("--max-steps-per-turn", type=int, default=20)
    run.add_argument("--max-steps", type=int, default=40)
    run.add_argument("--temperature", type=_temperature, default=0.0,
                     help="sampling temperature, or 'none' to leave it out (models that refuse it, e.g. GPT-5)")
    run.add_argument("--max-tokens", type=int, default=512)
    run.add_argument("--prompting", choices=PROMPTING, default="amd",
                     help="amd: our system prompt (default); official: no system prompt of ours, the benchmark's "
                          "messages and native tools alone, as an official function-calling harness sends them; "
                          "json: one JSON object per reply (a call or the answer), its decoding constrained to the "
                          "tools' schemas (response_format json_schema: llama.cpp, vLLM)")
    run.add_argument("--think", choices=("on", "off"), default="off",
                     help="Qwen3's thinking (vllm: specs only); off as in the paper")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--request-timeout", type=float, default=600.0, help="seconds per model request")
    run.add_argument("--max-retries", type=int, default=6,
                     help="retries per model reply (408, 409, 429, 5xx, timeouts, dropped connections, malformed "
                          "bodies), with the openai SDK's backoff")
    run.add_argument("--memory", help="memory bank folder (from `amd memory build`)")
    run.add_argument("--memory-config", default=ZERO_SHOT, help=", ".join(memory_configs()))
    run.add_argument("--protocol", default=SELF_EXCLUDED, help=", ".join(PROTOCOLS) + f" (default {SELF_EXCLUDED})")
    types = list(memory_types().values())[:3]
    run.add_argument("--k", help="top-k per memory type, e.g. " + ",".join(f"{t.code}=1" for t in types))
    run.add_argument("--delta", help="minimum similarity per memory type, e.g. " + ",".join(
        f"{t.code}={t.default_delta}" for t in types if t.default_delta is not None))
    run.add_argument("--split-seed", type=int, default=0, help="seed of a cross split's 7:3 split")
    run.add_argument("--memory-option", action="append", default=[], metavar="KEY=VALUE",
                     help="a run option of the memory method (" + "; ".join(
                         f"{spec.name}: {', '.join(spec.run_options)}" for spec in method_specs() if spec.run_options)
                     + f"); with any method over a bank pooled from several teachers (amd memory pool), "
                       f"{PREFER_TEACHER}=NAME")
    for flag, (name, option) in option_flags().items():
        run.add_argument(flag, dest="memory_option", action="append_const", const=f"{name}=true",
                         help=f"{option.help} (= --memory-option {name}=true)")
    run.add_argument("--no-progress", action="store_true")


def _add_score(commands) -> None:
    score = commands.add_parser("score", help="success rate, mean steps and tokens of run files")
    score.add_argument("files", nargs="+")
    score.add_argument("--json", help="also write the table as JSON here")
    score.add_argument("--recheck", action="store_true",
                       help="re-score every stored trajectory with the benchmark's own checker")
    score.set_defaults(handler=_score_command)


def _run_command(args) -> int:
    from amd.run_cli import run_from_args

    return run_from_args(args)


def _score_command(args) -> int:
    from amd.score import score_from_args

    return score_from_args(args)


def _temperature(text: str) -> float | None:
    return None if text.lower() in ("none", "null") else float(text)


def parse_per_type(text: str | None, flag: str, cast) -> dict:
    """'wf=1,st=2' -> {'workflow': 1, 'subtask': 2}; a bad item names the flag and the item."""
    if not text:
        return {}
    values = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        if not sep:
            raise AmdError(f"{flag}: bad item {item!r}; expected TYPE=VALUE, e.g. {next(iter(memory_types()))}=1")
        try:
            type_name = memory_type(name.strip()).name
        except AmdError as error:
            raise AmdError(f"{flag}: {error}") from None
        try:
            values[type_name] = cast(value)
        except ValueError:
            raise AmdError(f"{flag}: {item!r} has a value that is not a {cast.__name__}") from None
    return values


if __name__ == "__main__":
    sys.exit(main())
