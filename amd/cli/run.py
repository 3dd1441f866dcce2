"""`amd run`: its flags, then command-line choices turned into a RunSpec, the model opened, the tasks run, a report."""

import contextlib
import json
import logging
import math
import sys
from pathlib import Path

from amd.agent.loop import Limits
from amd.agent.progress import PROGRESS_EVERY_S
from amd.agent.runner import RunSpec, run_tasks
from amd.benchmarks.base import create_benchmark
from amd.benchmarks.duplicates import exclusion_groups
from amd.cli.arguments import key_values, similarities, temperature
from amd.core.errors import AmdError, did_you_mean
from amd.core.per_type import from_flag_value
from amd.core.registry import AGENTS, BENCHMARKS
from amd.core.spec import finite_float
from amd.core.text import printable
from amd.core.trajectory import recorded
from amd.core.vocabulary import (
    AGENT_PARAM_DEFAULTS,
    CROSS_SPLITS,
    MEMORY_FRAMINGS,
    PREFER_TEACHER,
    PROMPTING,
    PROTOCOLS,
    SELF_EXCLUDED,
    ZERO_SHOT,
    memory_configs,
    memory_types,
    method_specs,
    option_flags,
)
from amd.llm.specs import MODEL_FORMS

log = logging.getLogger("amd.run")


def register(subparsers) -> None:
    run = subparsers.add_parser("run", help="run an agent on benchmark tasks, one trajectory per task")
    add_run_arguments(run)
    run.set_defaults(handler=run_from_args)


def add_run_arguments(run) -> None:
    """The flags of `amd run` (also those of `amd probe`, which runs the same way on a probe set)."""
    run.add_argument("benchmark", help=", ".join(
        entry.name + ("" if entry.target else " (declared)") for entry in BENCHMARKS.entries()))
    run.add_argument("--agent", required=True,
                     help=" | ".join([*(name for name in AGENTS.names() if name != "model"),
                                      *(form for form in MODEL_FORMS if "serve" not in form)])
                     + " (an openai: or vllm: spec may end in #key=VAR, the variable that holds its key)")
    run.add_argument("--out", required=True, help="trajectory file (JSONL); an existing one is resumed")
    run.add_argument("--resume-from", metavar="FILE",
                     help="another copy of this run's output (JSONL, or .jsonl.gz: a release's): where --out holds "
                          "no finished task, its whole, valid records of the same run (agent and memory setting) "
                          "are copied into --out first, so their tasks are not run again; a missing FILE seeds "
                          "nothing")
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
    run.add_argument("--temperature", type=temperature, default=0.0,
                     help="sampling temperature, or 'none' to leave it out (models that refuse it, e.g. GPT-5)")
    run.add_argument("--max-tokens", type=int, default=512)
    run.add_argument("--prompting", choices=PROMPTING, default="amd",
                     help="amd: our system prompt (default); official: no system prompt of ours, the benchmark's "
                          "messages and native tools alone, as an official function-calling harness sends them; "
                          "json: one JSON object per reply (a call or the answer), its decoding constrained to the "
                          "tools' schemas (response_format json_schema: llama.cpp, vLLM)")
    run.add_argument("--memory-framing", choices=MEMORY_FRAMINGS, default=MEMORY_FRAMINGS[0],
                     help="labelled: retrieved memory delimited and labelled as data, never instructions (default); "
                          "bare: the text alone, as the paper's releases inject it")
    run.add_argument("--think", choices=("on", "off"), default="off",
                     help="Qwen3's thinking (vllm: specs only); off as in the paper")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--request-timeout", type=finite_float, default=600.0, help="seconds per model request")
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
    run.add_argument("--no-progress", action="store_true", help="no progress bar or progress lines")
    run.add_argument("--progress-every", type=float, default=PROGRESS_EVERY_S, metavar="SECONDS",
                     help="where stderr is a log, not a terminal: a progress line (tasks done of total, steps, "
                          f"elapsed) at least this often (default {PROGRESS_EVERY_S:g})")


def run_from_args(args, choose=None) -> int:
    """`amd run`; `choose(task_ids)`, where given, narrows the tasks once every other selection is made (amd probe)."""
    _check_positive(args)
    options = key_values(args.benchmark_option, "--benchmark-option")
    if args.user_model and options.setdefault("user_model", args.user_model) != args.user_model:
        raise AmdError("--user-model and --benchmark-option user_model name different models")
    with contextlib.closing(create_benchmark(args.benchmark, **options)) as benchmark:
        return _run(args, benchmark, choose)


def _run(args, benchmark, choose=None) -> int:
    task_ids = select_tasks(benchmark.task_ids(), args.tasks, args.limit)
    groups = exclusion_groups(benchmark).groups  # the runner records them too (amd.benchmarks.duplicates)
    memory, memory_info = _memory(args, from_flag_value(args.k, "--k", int), similarities(args.delta), groups)
    if args.protocol in CROSS_SPLITS and memory is not None:
        from amd.memory.protocols import eval_task_ids

        # The split is over the bank's own tasks (or their groups), the same ones the hooks split, so the two agree.
        eval_side = set(eval_task_ids(args.memory, args.protocol, args.split_seed, groups))
        task_ids = [task_id for task_id in task_ids if task_id in eval_side]
        log.info("%s (seed %d): %d tasks on the evaluation side", args.protocol, args.split_seed, len(task_ids))
    if choose is not None:
        task_ids = choose(task_ids)
    limits = Limits(max_steps_per_turn=args.max_steps_per_turn, max_steps=args.max_steps)
    with _agent_factory(args) as (make_agent, agent_info, ledger):
        spec = RunSpec(benchmark=benchmark, agent_info=agent_info, make_agent=make_agent, memory=memory,
                       memory_info=memory_info, limits=limits)
        summary = run_tasks(spec, task_ids, args.out, concurrency=args.concurrency,
                            progress=not args.no_progress, progress_every_s=args.progress_every,
                            seed_from=args.resume_from)
    _report(args.out, summary, ledger)
    return 1 if summary.crashed else 0


def select_tasks(all_ids: list[str], tasks: str | None, limit: int | None) -> list[str]:
    ids = all_ids
    if tasks:
        known = set(all_ids)
        ids = [task.strip() for task in tasks.split(",") if task.strip()]
        for task_id in ids:
            if task_id not in known:
                raise AmdError(f"unknown task id {task_id!r}{did_you_mean(task_id, all_ids)}")
        if len(set(ids)) != len(ids):
            raise AmdError("--tasks names a task more than once")
    return ids[:limit] if limit is not None else ids


def _check_positive(args) -> None:
    if args.max_retries < 0 or args.request_timeout <= 0:
        raise AmdError("--max-retries must be >= 0 and --request-timeout > 0")
    if not 0 < args.progress_every < math.inf:
        raise AmdError(f"--progress-every must be a positive number of seconds, got {args.progress_every}")
    for flag in ("limit", "concurrency", "max_steps_per_turn", "max_steps", "max_tokens"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            raise AmdError(f"--{flag.replace('_', '-')} must be at least 1, got {value}")


def _memory(args, k: dict, delta: dict, task_groups: dict[str, str]):
    if args.memory_config == ZERO_SHOT:
        if args.memory or args.memory_option:
            raise AmdError(f"--memory-config {ZERO_SHOT} takes no --memory bank and no memory option "
                           f"({', '.join(['--memory-option', *option_flags()])})")
        return None, {"config": ZERO_SHOT, "bank": None}
    if not args.memory:
        raise AmdError(f"--memory-config {args.memory_config} needs --memory BANK_DIR")
    from amd.memory.method import open_memory

    options = key_values(args.memory_option, "--memory-option")
    hooks = open_memory(args.memory, args.memory_config, protocol=args.protocol, k=k, delta=delta,
                        split_seed=args.split_seed, options=options, task_groups=task_groups)
    assert hooks is not None  # None only for zero_shot, handled above
    return hooks, hooks.describe()


@contextlib.contextmanager
def _agent_factory(args):
    """(make_agent(episode), the record's agent field, the token ledger or None) for `--agent`: a registered
    agent that needs no model is named by itself (oracle); any other spec is a model for the `model` agent."""
    if args.agent in AGENTS.names() and not AGENTS.load(args.agent).needs_model:
        agent_class = AGENTS.load(args.agent)
        info = {"spec": args.agent, "kind": args.agent, "model": None,
                "params": {"note": agent_class.description}}
        yield (lambda episode: agent_class.create(episode, None)), info, None
        return
    from amd.llm import open_model

    agent_class = AGENTS.load("model")
    params = recorded({"temperature": args.temperature, "max_tokens": args.max_tokens, "seed": args.seed,
                       "prompting": args.prompting, "think": args.think == "on",
                       "memory_framing": args.memory_framing}, AGENT_PARAM_DEFAULTS)
    transport = {"timeout_s": args.request_timeout, "max_retries": args.max_retries}
    with open_model(args.agent, {**params, **transport}) as model:
        model.ensure_reachable()
        info = {"spec": args.agent, "kind": "model", "model": model.model, "params": params}
        yield (lambda episode: agent_class.create(episode, model)), info, model.ledger


def _report(out_path, summary, ledger) -> None:
    line = f"{summary.finished} tasks run, {summary.skipped} already done"
    if ledger is not None:
        line += f", {ledger.cut_replies} model replies cut by the token limit (--max-tokens)"
    if summary.crashed:
        line += f", {len(summary.crashed)} crashed (not written; rerun to retry): {', '.join(summary.crashed)}"
    print(printable(f"amd run: {line} -> {out_path}"), file=sys.stderr)
    if ledger is not None:
        totals = vars(ledger).copy()
        print(f"amd run: token ledger {json.dumps(totals)}", file=sys.stderr)
        ledger_path = Path(str(out_path) + ".ledger.json")
        ledger_path.write_text(json.dumps(totals, indent=1) + "\n")
