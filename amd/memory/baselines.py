"""What the paper's three baseline methods (Table 1: ReasoningBank, MemP, SASM) share.

They learn from every record of the teacher's run, successes and failures alike, as the AMD authors' release
builds them (`build_from_failures=True` in toolsandbox/common/utils/build_{rb,memp,sasm}_from_existing.py of
github taeilkim2465/agentic_memory_distillation), one record per task. This module gives them the record
selection, the outcome word, the run as text for a writer prompt, one writer call that logs what it could not
use, the bank manifest's outcome counts and writer audit, and typed calls (values replaced by placeholders) for
their model-free `rules` writers. Each method keeps its own prompts, entries, retrieval and injection.
Their specs' `released_for` names the benchmarks for which that release holds a method's code (for ToolSandbox and
BFCL it has run and build scripts whose modules are missing, so there our settings are carried over: a
reconstruction); `reconstructed` says what is ours on every benchmark.
"""

import json
import logging
import re
from collections import Counter
from collections.abc import Callable
from typing import Any, ClassVar

from amd.core.errors import AmdError
from amd.core.prompts import load_prompt
from amd.memory.bank import BankContents
from amd.memory.method import BankHooks, first_per_task
from amd.memory.placeholders import placeholder_for, scrub_free_text
from amd.memory.steps import Step, is_error_observation, one_line, qualified_name, render_steps_code

log = logging.getLogger("amd.memory")

SUCCESS, FAILURE = "success", "failure"
TRAJECTORY_CHARS = 8000  # the release cuts the run shown to MemP's writer at 8,000 characters; we do so for all
AUDIT_KEYS = ("answers_repaired", "writer_fallbacks")
_SLOT = re.compile(r"^\s*<[^<>]*>\s*$")


def outcome(record: dict) -> str:
    return SUCCESS if record["success"] is True else FAILURE


def baseline_manifest(used: list[dict], audit: Counter) -> dict:
    """The manifest fields of a baseline bank: which records it learnt from, by outcome, and the writer audit."""
    return {"outcomes": {word: sum(outcome(r) == word for r in used) for word in (SUCCESS, FAILURE)},
            "used_task_ids": sorted(record["task_id"] for record in used),
            "audit": {key: audit.get(key, 0) for key in AUDIT_KEYS}}


class PerTaskBaseline:
    """The skeleton the three baselines share as methods: each task's run distilled into entries of one memory type
    (`distill(record, benchmark, chat) -> (entries, writer audit)`), no build or run options, and the method's hooks
    opened over the bank. A baseline names its parts; `manifest_extra` adds its own manifest fields."""

    name: ClassVar[str]
    version: ClassVar[str] = "1"
    memory_type: ClassVar[str]  # the one memory type's name
    embedded: ClassVar[str]  # the entry field that is embedded
    distill: ClassVar[Callable[..., tuple[list[dict], Counter]]]
    hooks: ClassVar[type[BankHooks]]

    def build(self, records: list[dict], context) -> BankContents:
        entries, audit, used = distill_each_task(self.name, records, context, type(self).distill)
        return BankContents(entries={self.memory_type: entries}, embedded={self.memory_type: self.embedded},
                            manifest=baseline_manifest(used, audit) | self.manifest_extra())

    def manifest_extra(self) -> dict[str, Any]:
        return {}

    def open(self, bank, config, settings) -> BankHooks:
        reject_options(self.name, settings.options, "run")
        return self.hooks(bank, config, settings)


def distill_each_task(method: str, records: list[dict], context, distill) -> tuple[list[dict], Counter, list]:
    """What the three baselines share in building: no build options, one record per task (successes and failures
    alike), `distill(record, benchmark, chat) -> (entries, writer audit)` over them (a model writer serves several
    at once); returns the entries in record order, the summed audit and the records used."""
    reject_options(method, context.options)
    used = first_per_task(records)
    results = context.map(lambda record: distill(record, context.benchmark(record["benchmark"]),
                                                 context.writer.chat), used)
    entries = [entry for record_entries, _ in results for entry in record_entries]
    return entries, sum((audit for _, audit in results), Counter()), used


def reject_options(method: str, options: dict, kind: str = "build") -> None:
    if options:
        raise AmdError(f"memory method {method} has no {kind} option {sorted(options)}")


def run_text(steps: list[Step]) -> str:
    """The run for a writer prompt: calls with `# -> observation` comments, cut at TRAJECTORY_CHARS."""
    text = render_steps_code(steps) or "(no calls)"
    if len(text) <= TRAJECTORY_CHARS:
        return text
    return text[:TRAJECTORY_CHARS] + "\n# [rest of the run cut]"


def ask_model(chat, prompt: str, task_id: str, **fields) -> str | None:
    """The model's answer to prompts/`prompt`.md filled with `fields`, or None (logged) without one."""
    reply = chat([{"role": "user", "content": load_prompt(prompt).format(**fields)}])
    text = (reply.text or "").strip()
    if reply.error or not text:
        log.warning("%s: no answer to prompts/%s.md (%s); falling back to the rule", task_id, prompt,
                    reply.error or "empty")
        return None
    return text


def is_slot(text: str) -> bool:
    """A value copied from a prompt's answer form (`<keyword>`) instead of filled in: small models echo it."""
    return bool(_SLOT.match(text))


def typed_call(benchmark, call: dict) -> str:
    """`app.function(arg=<PLACEHOLDER>, ...)`: the call with its values replaced by typed placeholders."""
    arguments = ", ".join(f"{key}={placeholder_for(value, key)}" for key, value in call["arguments"].items())
    return f"{qualified_name(benchmark, call['name'])}({arguments})"


def executed(steps: list[Step]) -> list[tuple[Step, dict, str]]:
    return [(step, call, observation) for step in steps for call, observation in step.call_observations()]


def call_order(benchmark, steps: list[Step], limit: int = 8) -> str:
    """The typed calls in order, consecutive repeats of one function collapsed, at most `limit` shown."""
    calls: list[Any] = []
    for _, call, _ in executed(steps):
        if not calls or calls[-1][0] != call["name"]:
            calls.append((call["name"], typed_call(benchmark, call)))
    shown = " -> ".join(text for _, text in calls[:limit])
    return shown + (" -> ..." if len(calls) > limit else "") if calls else "no call"


def first_error(benchmark, steps: list[Step]) -> tuple[str, str] | None:
    """(app.function, scrubbed error message) of the run's first failing call, or None."""
    for _, call, observation in executed(steps):
        if is_error_observation(observation):
            return qualified_name(benchmark, call["name"]), error_message(observation)
    return None


def error_message(observation: str, words: int = 12) -> str:
    """The error text of an observation, values scrubbed, at most `words` words."""
    try:
        parsed = json.loads(observation)
    except json.JSONDecodeError:
        parsed = observation
    text = str(parsed.get("error", observation)) if isinstance(parsed, dict) else observation
    return " ".join(scrub_free_text(one_line(text, 200)).split()[:words])


def apps_used(benchmark, steps: list[Step]) -> list[str]:
    names = [qualified_name(benchmark, call["name"]) for _, call, _ in executed(steps)]
    return list(dict.fromkeys(name.rpartition(".")[0] for name in names if "." in name))


def numbered_steps(steps: list[Step]) -> str:
    """One line per step (`step i: call -> observation; ...`), a line where a user turn starts, cut at
    TRAJECTORY_CHARS: the run as a writer sees it when it must name step numbers."""
    lines = []
    for step in steps:
        if step.first_of_turn:
            lines.append(f"[user turn {step.turn}] {one_line(step.user, 300)}")
        calls = "; ".join(f"{call['call']} -> {one_line(observation, 150)}"
                          for call, observation in step.call_observations())
        lines.append(f"step {step.index}: {calls or 'answer without a call: ' + one_line(step.data['model_text'], 150)}")
    text = "\n".join(lines)
    return text if len(text) <= TRAJECTORY_CHARS else text[:TRAJECTORY_CHARS] + "\n[rest of the run cut]"
