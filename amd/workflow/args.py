"""Config values to `amd` command-line arguments, in one tested place (tests/test_workflow_args.py checks that
every key the config schema allows is mapped, and that every flag made here is one `amd` accepts)."""

import json
import shlex
from collections.abc import Mapping

from amd.core import per_type

# `run` settings (and their per-agent overrides) -> `amd run` flags.
RUN_FLAGS = {"max_steps_per_turn": "--max-steps-per-turn", "max_steps": "--max-steps",
             "temperature": "--temperature", "max_tokens": "--max-tokens", "concurrency": "--concurrency",
             "prompting": "--prompting", "think": "--think", "memory_framing": "--memory-framing"}
SAMPLING = ("temperature", "max_tokens")  # a writer's --writer-params
MODEL_ONLY = (*SAMPLING, "prompting", "think", "memory_framing")  # what a model-free agent never gets
# Agent keys that are not `run` settings: the agent spec, how it is served, its own tasks and options per benchmark
AGENT_KEYS = ("spec", "serve", "benchmarks", "like")
BASE_URL = "{base_url}"  # filled in by `amd serve-batch`


def quoted(value) -> str:
    return shlex.quote(str(value))


def agent_flag(spec: str, served: bool) -> str:
    """--agent SPEC; a served model's base URL is filled in by `amd serve-batch`."""
    return f"--agent {quoted(f'{spec}@{BASE_URL}' if served else spec)}"


def run_flags(settings: dict, samples: bool) -> str:
    """Step limits, sampling and concurrency; without sampling settings for an agent that samples nothing (so
    changing them never reruns it)."""
    chosen = {key: value for key, value in settings.items() if samples or key not in MODEL_ONLY}
    return " ".join(f"{RUN_FLAGS[key]} {quoted(_flag_value(value))}" for key, value in sorted(chosen.items()))


def _flag_value(value) -> str:
    return ("on" if value else "off") if isinstance(value, bool) else str(value)


def writer_flags(entry: dict, served: bool = False) -> str:
    """--writer SPEC (a served model's base URL filled in by `amd serve-batch`) and, for a model writer with its own
    sampling settings, --writer-params."""
    params = {key: entry[key] for key in SAMPLING if key in entry}
    extra = f" --writer-params {quoted(json.dumps(params))}" if params else ""
    spec = f"{entry['spec']}@{BASE_URL}" if served else entry["spec"]
    return f"--writer {quoted(spec)}{extra}"


def build_option_flags(method: str, options: dict) -> str:
    """--method and its build options (an option whose text is None is left out)."""
    return " ".join([f"--method {method}", *(f"--option {quoted(f'{key}={text}')}" for key, text in options.items()
                                            if text is not None)])


def benchmark_flags(tasks: list[str] | None, options: dict) -> str:
    """--tasks (none: every task) and the benchmark's own options."""
    flags = [f"--tasks {quoted(','.join(tasks))}"] if tasks else []
    flags += [f"--benchmark-option {quoted(f'{key}={option_text(value)}')}" for key, value in sorted(options.items())]
    return " ".join(flags)


def serve_flags(spec: str, serve: Mapping) -> str:
    """`amd serve-batch` flags for a model the workflow serves with vLLM (rules/serve.smk)."""
    parts = [f"--model {quoted(spec.removeprefix('vllm:'))}", f"--gpus {serve.get('gpus', 1)}"]
    if serve.get("args"):
        parts.append(f"--serve-args {quoted(' '.join(serve['args']))}")
    return " ".join(parts)


def memory_flags(memcfg: str, codes: tuple[str, ...], protocol: str, k: dict, delta: dict, split_seed: int | None,
                 options: dict) -> str:
    """--memory-config, --protocol, --k and --delta for the config's types, the split seed of a cross split, and
    the method's run options."""
    parts = [f"--memory-config {memcfg}", f"--protocol {protocol}",
             f"--k {per_type.flag_value(k, codes)}"]
    chosen = sorted(code for code in codes if code in delta)
    if chosen:
        parts.append(f"--delta {per_type.flag_value(delta, chosen)}")
    if split_seed is not None:
        parts.append(f"--split-seed {split_seed}")
    parts += [f"--memory-option {quoted(f'{key}={option_text(value)}')}" for key, value in sorted(options.items())]
    return " ".join(parts)


def option_text(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def view_flags(against: list[str], bank: list[str]) -> str:
    """`amd view` flags: the run shown beside this one and the bank it read, where there are."""
    return " ".join([*(f"--against {quoted(path)}" for path in against), *(f"--bank {quoted(path)}" for path in bank)])
