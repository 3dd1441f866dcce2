"""`amd run`: turn command-line choices into a RunSpec, open the model, run the tasks, report."""

import contextlib
import json
import logging
import sys
from pathlib import Path

from amd.agent.loop import Limits
from amd.errors import AmdError, did_you_mean
from amd.registry import AGENTS, create_benchmark
from amd.runner import RunSpec, run_tasks
from amd.trajectory import recorded
from amd.vocabulary import AGENT_PARAM_DEFAULTS, CROSS_SPLITS, ZERO_SHOT, option_flags

log = logging.getLogger("amd.run")


def run_from_args(args, choose=None) -> int:
    """`amd run`; `choose(task_ids)`, where given, narrows the tasks once every other selection is made (amd probe)."""
    _check_positive(args)
    from amd.memory.cli import parse_options

    options = parse_options(args.benchmark_option, "--benchmark-option")
    if args.user_model and options.setdefault("user_model", args.user_model) != args.user_model:
        raise AmdError("--user-model and --benchmark-option user_model name different models")
    with contextlib.closing(create_benchmark(args.benchmark, **options)) as benchmark:
        return _run(args, benchmark, choose)


def _run(args, benchmark, choose=None) -> int:
    from amd.cli import parse_per_type

    task_ids = select_tasks(benchmark.task_ids(), args.tasks, args.limit)
    memory, memory_info = _memory(args, parse_per_type(args.k, "--k", int),
                                  parse_per_type(args.delta, "--delta", float))
    if args.protocol in CROSS_SPLITS and memory is not None:
        from amd.memory.protocols import eval_task_ids

        # The split is over the bank's own tasks (or their groups), the same ones the hooks split, so the two agree.
        eval_side = set(eval_task_ids(args.memory, args.protocol, args.split_seed))
        task_ids = [task_id for task_id in task_ids if task_id in eval_side]
        log.info("%s (seed %d): %d tasks on the evaluation side", args.protocol, args.split_seed, len(task_ids))
    if choose is not None:
        task_ids = choose(task_ids)
    limits = Limits(max_steps_per_turn=args.max_steps_per_turn, max_steps=args.max_steps)
    with _agent_factory(args) as (make_agent, agent_info, ledger):
        spec = RunSpec(benchmark=benchmark, agent_info=agent_info, make_agent=make_agent, memory=memory,
                       memory_info=memory_info, limits=limits)
        summary = run_tasks(spec, task_ids, args.out, concurrency=args.concurrency,
                            progress=not args.no_progress)
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
    for flag in ("limit", "concurrency", "max_steps_per_turn", "max_steps", "max_tokens"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            raise AmdError(f"--{flag.replace('_', '-')} must be at least 1, got {value}")


def _memory(args, k: dict, delta: dict):
    if args.memory_config == ZERO_SHOT:
        if args.memory or args.memory_option:
            raise AmdError(f"--memory-config {ZERO_SHOT} takes no --memory bank and no memory option "
                           f"({', '.join(['--memory-option', *option_flags()])})")
        return None, {"config": ZERO_SHOT, "bank": None}
    if not args.memory:
        raise AmdError(f"--memory-config {args.memory_config} needs --memory BANK_DIR")
    from amd.memory.cli import parse_options
    from amd.memory.method import open_memory

    options = parse_options(args.memory_option, "--memory-option")
    hooks = open_memory(args.memory, args.memory_config, protocol=args.protocol, k=k, delta=delta,
                        split_seed=args.split_seed, options=options)
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
                       "prompting": args.prompting, "think": args.think == "on"}, AGENT_PARAM_DEFAULTS)
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
    print(f"amd run: {line} -> {out_path}", file=sys.stderr)
    if ledger is not None:
        totals = vars(ledger).copy()
        print(f"amd run: token ledger {json.dumps(totals)}", file=sys.stderr)
        ledger_path = Path(str(out_path) + ".ledger.json")
        ledger_path.write_text(json.dumps(totals, indent=1) + "\n")
