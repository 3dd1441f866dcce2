"""AMD's builders: successful trajectories -> workflow, subtask and function entries (paper Section 3.2).

Entry ids are `{type}:{task_id}:{n}` (n counts from 0 within the task), stable across rebuilds of the same
trajectories. Every entry carries `source_task_id` for the leakage protocols. `benchmark` is the benchmark object
the record was run on (its functions' apps and docs).
"""

import logging
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from amd.benchmarks.base import Benchmark
from amd.core.prompts import benchmark_prompt
from amd.core.spec import OptionValue, parse_options
from amd.memory.method import first_per_task
from amd.memory.placeholders import ValueMask, audit_insight
from amd.memory.steps import (
    OBSERVATION_CHARS,
    call_example_code,
    call_example_prose,
    is_error_observation,
    qualified_name,
    render_steps_code,
    render_steps_prose,
    steps_of,
)
from amd.methods.amd import writers
from amd.methods.amd.spec import AMD_TYPES, BUILD_OPTIONS

log = logging.getLogger("amd.memory")
ALL_TYPES = tuple(t.name for t in AMD_TYPES)


@dataclass(frozen=True)
class BuildSettings:
    """How entries are written (build options; the defaults are amd's own). `prompts=benchmark`: the writer model
    uses the benchmark's own workflow and segmentation prompts where prompts/ has them (the paper's Figs. 13-14 are
    AppWorld's); `insights=trim`: an insight over the word limit is cut to it instead of rejected, `insights=keep`:
    kept whole (the release asks for fewer than 120 words and keeps the answer); `observation_chars`: where
    observations in entries are cut (the release: 500 for subtask and function entries); `audit=none`: insights as
    the writer wrote them, no value replaced and none dropped for naming no function (the paper and its release have
    no such audit); `entry_values`: argument values in subtask and function entries kept (raw), as typed placeholders
    (masked), and results scrubbed too (scrubbed) (amd.memory.placeholders.ValueMask); `subtask_key`: what a
    subtask entry is embedded by, its description (the paper) or its label and description (the release)."""

    prompts: str = "generic"
    insights: str = "reject"
    observation_chars: int = OBSERVATION_CHARS
    audit: str = "placeholders"
    entry_values: str = "raw"
    subtask_key: str = "description"

    @classmethod
    def from_options(cls, options: Mapping[str, OptionValue]) -> "BuildSettings":
        """The settings of the build options given, parsed (amd.core.spec.parse_options)."""
        return cls(str(options.get("prompts", cls.prompts)), str(options.get("insights", cls.insights)),
                   int(options.get("observation_chars", cls.observation_chars)), str(options.get("audit", cls.audit)),
                   str(options.get("entry_values", cls.entry_values)), str(options.get("subtask_key", cls.subtask_key)))

    def describe(self) -> str:
        """One string (a pooled bank's members must then agree on it rather than sum its numbers); the options added
        after the first three only where they are not the default, as banks built before them read."""
        defaults = vars(DEFAULT_SETTINGS)
        chosen = {key: value for key, value in vars(self).items() if key in FIRST_OPTIONS or value != defaults[key]}
        return ",".join(f"{key}={value}" for key, value in chosen.items())

    def mask(self, steps) -> ValueMask:
        """How this record's entries show its calls' values."""
        return ValueMask(self.entry_values, [call for _, call, _ in writers.executed_calls(steps)])

    @classmethod
    def described(cls, text: str | None) -> "BuildSettings":
        """The settings `describe` wrote (a bank's manifest), the defaults for None (a bank built without any)."""
        if not text:
            return cls()
        given = dict(item.split("=", 1) for item in text.split(","))
        return cls.from_options(parse_options("amd", "build", given, BUILD_OPTIONS))

    def prompt(self, name: str, benchmark: Benchmark) -> str:
        return benchmark_prompt(name, benchmark.name) if self.prompts == "benchmark" else name


DEFAULT_SETTINGS = BuildSettings()
FIRST_OPTIONS = ("prompts", "insights", "observation_chars")  # always in a bank's build_settings
SUBTASK_KEY_FIELD = "key"  # subtask_key=label_description: the field embedded, "label: description"


@dataclass
class BuildResult:
    workflow: list[dict] = field(default_factory=list)
    subtask: list[dict] = field(default_factory=list)
    function: list[dict] = field(default_factory=list)
    audit: Counter = field(default_factory=Counter)  # insights repaired / rejected, values replaced, fallbacks
    audited: dict = field(default_factory=lambda: {"dropped": [], "edited": []})  # which insights, and why


def successful(records: list[dict]) -> list[dict]:
    """Successful records only, first one per task id (later duplicates are logged and skipped)."""
    return first_per_task([record for record in records if record["success"] is True], "successful trajectory")


def build_entries(record: dict, benchmark, chat=None, types=ALL_TYPES,
                  settings: BuildSettings = DEFAULT_SETTINGS) -> BuildResult:
    """The entries of one successful record, of the memory types named in `types`. `chat` (messages ->
    ChatReply) selects the model writer."""
    result = BuildResult()
    steps = steps_of(record)
    workflow = workflow_entry(record, benchmark, steps, chat, result, settings) if "workflow" in types else None
    if workflow:
        result.workflow.append(workflow)
    if "subtask" in types:
        result.subtask.extend(subtask_entries(record, benchmark, steps, chat, settings))
    if "function" in types:
        result.function.extend(function_entries(record, benchmark, steps, settings))
    return result


def workflow_entry(record: dict, benchmark, steps, chat, result: BuildResult,
                   settings: BuildSettings = DEFAULT_SETTINGS) -> dict | None:
    """The record's workflow entry, None where it has no call or the audit rejects its insight; `result` gets the
    audit's counts and which insight it dropped or edited."""
    task_id, audit = record["task_id"], result.audit
    calls = [call for _, call, _ in writers.executed_calls(steps)]
    if not calls:
        return None
    insight = writers.model_workflow(chat, record["instruction"], benchmark, steps,
                                     settings.prompt("memory_workflow", benchmark)) if chat else None
    if chat and insight is None:
        audit["writer_fallbacks"] += 1
    insight = insight or writers.rules_workflow(benchmark, steps)
    names = list(dict.fromkeys(qualified_name(benchmark, call["name"]) for call in calls))
    checked = audit_insight(insight, calls, names, trim=settings.insights == "trim",
                            repair=settings.audit == "placeholders", keep_long=settings.insights == "keep")
    audit["values_replaced"] += checked.repaired
    audit["insights_repaired"] += int(checked.repaired > 0 and not checked.rejected)
    audit["insights_trimmed"] += int(checked.trimmed and not checked.rejected)
    entry_id = f"workflow:{task_id}:0"
    if checked.rejected:
        audit["insights_rejected"] += 1
        result.audited["dropped"].append({"source_task_id": task_id, "reason": checked.reason})
        log.warning("%s: workflow insight rejected by the placeholder audit: %s", task_id, checked.reason)
        return None
    edits = ([f"{checked.repaired} values replaced"] if checked.repaired else []) + (
        ["cut to the word limit"] if checked.trimmed else [])
    if edits:
        result.audited["edited"].append({"id": entry_id, "source_task_id": task_id, "edit": ", ".join(edits)})
    return {"id": entry_id, "type": "workflow", "source_task_id": task_id,
            "query": record["instruction"], "insight": checked.text,
            "code": writers.workflow_code(benchmark, steps)}


def subtask_entries(record: dict, benchmark, steps, chat, settings: BuildSettings = DEFAULT_SETTINGS) -> list[dict]:
    if not steps:
        return []
    task_id = record["task_id"]
    segments = (writers.model_segments(chat, benchmark, steps, task_id, settings.prompt("memory_segment", benchmark))
                if chat else writers.rules_segments(benchmark, steps))
    entries, mask = [], settings.mask(steps)
    for n, segment in enumerate(segments):
        part = steps[segment["start_step"]: segment["end_step"] + 1]
        segment = segment | {"description": mask.text(segment["description"])}
        entry = {"id": f"subtask:{task_id}:{n}", "type": "subtask", "source_task_id": task_id, **segment,
                 "code": render_steps_code(part, settings.observation_chars, mask),
                 "prose": render_steps_prose(benchmark, part)}
        if settings.subtask_key == "label_description":
            entry[SUBTASK_KEY_FIELD] = f"{segment['label']}: {segment['description']}"
        entries.append(entry)
    return entries


def function_entries(record: dict, benchmark, steps, settings: BuildSettings = DEFAULT_SETTINGS) -> list[dict]:
    """One entry per executed call that did not fail (an example of a call that worked), with the user turn and
    the preceding step — a failed attempt included — as context."""
    task_id, mask = record["task_id"], settings.mask(steps)
    entries: list[Any] = []
    for step in steps:
        previous = steps[step.index - 1] if step.index > 0 and not step.first_of_turn else None
        for call, observation in step.call_observations():
            if is_error_observation(observation):
                continue
            info = benchmark.function_info(call["name"])
            entries.append({
                "id": f"function:{task_id}:{len(entries)}", "type": "function", "source_task_id": task_id,
                "name": call["name"], "app": info.app, "call": mask.call(call),
                "observation": mask.observation(observation),
                "code": call_example_code(step, previous, call, observation, settings.observation_chars, mask),
                "prose": call_example_prose(benchmark, previous, call, observation),
                "doc": info.doc, "reasoning": f"{record['instruction']}\n{step.data.get('model_text', '')}".strip()})
    return entries
