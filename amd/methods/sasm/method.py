"""SASM, structurally aligned subtask-level memory (Shen et al. 2026, arXiv 2602.21611), as a registered memory
method. SASM has no official code; this follows the paper and the AMD authors' adaptation for Table 1 (their
release: appworld/sasm/build_sasm_memory_offline.py, appworld/sasm/experiments/code/ace/sasm_memory.py and
sasm_evaluation_react.py), and it is a reconstruction in two places: the stage set and the run-time variant.

Build: every trajectory, successes and failures alike, is cut into 3-7 subtasks of consecutive steps; each is a
triple (z, d, e): its stage z, a one-sentence description d (sub-goal and key tools; embedded, the retrieval
anchor) and an abstracted experience e of 3-8 bullets marked ✓ (do) or ✗ (avoid), written as what worked for a
successful run and as what went wrong for a failed one (prompts/sasm_segment.md, prompts/sasm_experience.md).
Stages: the AMD authors' AppWorld set {explore, authenticate, query, execute, verify} (the SASM paper's own stages
are for software engineering: analyze, reproduce, edit, verify); their stage set for the other benchmarks was
never published, so ours uses the AppWorld set everywhere, described for tool use in prompts/sasm_stages.md.
Run: the "upfront" variant of the authors' release: the student plans its task as (stage, description) pairs
(prompts/sasm_plan.md); for each stage, the first description retrieves the top-k entries of that stage only
(stage-gated), ranked by cosine(description, d); k = 1 as in the release's top-1 retrieval; the experiences go
into the system prompt, one block per stage (prompts/memory_block_sasm.md). A plan that cannot be read falls back
to every stage with the instruction as description, as the release does. The release's other variant swaps the
experience whenever the student announces a stage change in its reply; it is not implemented here.

The `rules` writer (model-free) assigns a stage to each step from the called functions' names (log-in words,
listing or navigation verbs, reading verbs, anything else changes state; a read after a change in the same turn
verifies it), joins steps of one stage, and fills the bullets from templates.
"""

import json
import logging
import re
from collections import Counter
from typing import Any

import numpy as np

from amd.agent.hooks import Injection, TaskContext
from amd.core.prompts import load_prompt
from amd.memory.baselines import (
    SUCCESS,
    PerTaskBaseline,
    ask_model,
    error_message,
    executed,
    is_slot,
    numbered_steps,
    outcome,
    run_text,
    typed_call,
)
from amd.memory.method import BankHooks, injection_records, query_record
from amd.memory.steps import Step, is_error_observation, one_line, qualified_name, steps_of
from amd.memory.writing import json_array_in

log = logging.getLogger("amd.memory")

STAGE = "stage"  # the memory type's name (its spec)
STAGES = ("explore", "authenticate", "query", "execute", "verify")
MIN_SEGMENTS, MAX_SEGMENTS = 3, 7
MIN_BULLETS, MAX_BULLETS = 3, 8
DO, AVOID = "✓", "✗"

# Rules writer: a function's stage from the words of its name (snake_case or camelCase).
_LOGIN_WORDS = ("login", "logout", "authenticat", "signin", "signout", "token")
_EXPLORE_VERBS = frozenset({"ls", "pwd", "cd", "find", "list", "du", "help", "tree"})
_READ_VERBS = frozenset({"get", "show", "view", "display", "check", "read", "cat", "grep", "search", "count", "wc",
                         "tail", "head", "diff", "fetch", "retrieve", "describe", "lookup", "stat", "sort", "query",
                         "estimate", "is", "has"})
_STRENGTH = {"execute": 4, "authenticate": 3, "verify": 2, "query": 1, "explore": 0}  # a step's strongest call wins
_PHRASE = {"explore": "Look around", "authenticate": "Log in", "query": "Read the data needed",
           "execute": "Make the requested change", "verify": "Check the result"}
_MARKED = re.compile(r"^\s*(?:[-*•]\s*|\d+[.)]\s*)?([✓✗])\s*(.+)$")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+(.+)$")


def bank_entries(record: dict, benchmark, chat=None) -> tuple[list[dict], Counter]:
    """One record's (z, d, e) entries and its writer audit; `chat` (messages -> ChatReply) selects the model
    writer."""
    audit: Counter[str]
    audit, steps, task_id = Counter(), steps_of(record), record["task_id"]
    if not steps:
        return [], audit
    segments = model_segments(chat, record, benchmark, steps, audit) if chat else None
    if chat and segments is None:
        audit["writer_fallbacks"] += 1
    entries = []
    for n, segment in enumerate(segments or rules_segments(benchmark, steps)):
        part = steps[segment["start_step"]: segment["end_step"] + 1]
        bullets = model_bullets(chat, record, segment, part, audit) if chat else None
        if chat and bullets is None:
            audit["writer_fallbacks"] += 1
        entries.append({"id": f"{STAGE}:{task_id}:{n}", "type": STAGE, "source_task_id": task_id, **segment,
                        "experience": "\n".join(bullets or rules_bullets(benchmark, record, part)),
                        "outcome": outcome(record)})
    return entries, audit


# ---- model writer --------------------------------------------------------------------------------------------------

def model_segments(chat, record: dict, benchmark, steps: list[Step], audit: Counter) -> list[dict] | None:
    text = ask_model(chat, "sasm_segment", record["task_id"], instruction=record["instruction"],
                     steps=numbered_steps(steps), last_step=len(steps) - 1, stages=load_prompt("sasm_stages"),
                     min_segments=MIN_SEGMENTS, max_segments=MAX_SEGMENTS)
    return None if text is None else repair_segments(text, benchmark, steps, record["task_id"], audit)


def repair_segments(text: str, benchmark, steps: list[Step], task_id: str, audit: Counter) -> list[dict] | None:
    """Segments from the writer's JSON array: an unknown stage or a step range outside the run drops the item,
    ranges are clipped, an empty description is filled by rule, at most MAX_SEGMENTS kept. None (logged) when no
    segment is left."""
    items, trimmed = json_array_in(text)
    segments = [segment for item in items or [] if (segment := _segment(item, len(steps), task_id))]
    if not segments:
        log.warning("%s: no usable segment in the writer answer; using the rule segments", task_id)
        return None
    repaired = trimmed or len(segments) != len(items or []) or len(segments) > MAX_SEGMENTS
    if len(segments) > MAX_SEGMENTS:
        log.warning("%s: the writer gave %d segments; kept the first %d", task_id, len(segments), MAX_SEGMENTS)
    segments = sorted(segments, key=lambda s: s["start_step"])[:MAX_SEGMENTS]
    for segment in segments:
        if not segment["description"]:
            segment["description"] = describe(benchmark, segment["stage"],
                                              steps[segment["start_step"]: segment["end_step"] + 1])
            repaired = True
    audit["answers_repaired"] += int(repaired)
    return segments


def _segment(item, n_steps: int, task_id: str) -> dict | None:
    try:
        stage = str(item["stage"]).strip().lower()
        first, last = max(int(item["start_step"]), 0), min(int(item["end_step"]), n_steps - 1)
    except (KeyError, TypeError, ValueError):
        log.warning("%s: dropped a malformed segment %s", task_id, one_line(json.dumps(item), 120))
        return None
    if stage not in STAGES or first > last:
        log.warning("%s: dropped a segment with stage %r and steps %s-%s", task_id, stage, first, last)
        return None
    description = " ".join(str(item.get("description", "")).split())
    return {"stage": stage, "description": "" if is_slot(description) else description,
            "start_step": first, "end_step": last}


def model_bullets(chat, record: dict, segment: dict, part: list[Step], audit: Counter) -> list[str] | None:
    """3-8 marked bullets from the writer; an unmarked bullet gets the run's outcome mark, extra ones are cut.
    None (logged) when the answer has no bullet."""
    task_id = record["task_id"]
    text = ask_model(chat, "sasm_experience", task_id, stage=segment["stage"], description=segment["description"],
                     succeeded=str(outcome(record) == SUCCESS).lower(), segment=run_text(part),
                     min_bullets=MIN_BULLETS, max_bullets=MAX_BULLETS)
    default_mark = DO if outcome(record) == SUCCESS else AVOID
    bullets, unmarked = [], 0
    for line in (text or "").splitlines():
        marked, plain = _MARKED.match(line), _BULLET.match(line)
        if marked:
            bullets.append(f"- {marked.group(1)} {marked.group(2).strip()}")
        elif plain:
            bullets.append(f"- {default_mark} {plain.group(1).strip()}")
            unmarked += 1
    if text is not None and not bullets:
        log.warning("%s: experience answer has no bullet; using the rule bullets", task_id)
    if unmarked or len(bullets) > MAX_BULLETS:
        log.info("%s: marked %d bullets and kept at most %d", task_id, unmarked, MAX_BULLETS)
        audit["answers_repaired"] += 1
    return bullets[:MAX_BULLETS] or None


# ---- rules writer ----------------------------------------------------------------------------------------------------

def step_stage(step: Step, changed_in_turn: bool) -> str | None:
    """The stage of one step from its calls' names (None for a step without a call)."""
    stages = [_call_stage(call["name"], changed_in_turn) for call in step.calls]
    return max(stages, key=_STRENGTH.__getitem__) if stages else None


def _call_stage(name: str, changed_in_turn: bool) -> str:
    words = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower().split("_")
    if any(login in "".join(words) for login in _LOGIN_WORDS):
        return "authenticate"
    if words[0] in _EXPLORE_VERBS:
        return "explore"
    if words[0] in _READ_VERBS:
        return "verify" if changed_in_turn else "query"
    return "execute"


def rules_segments(benchmark, steps: list[Step]) -> list[dict]:
    """Consecutive steps of one stage joined (a step without a call joins the one before), then the smallest
    neighbouring pair merged (the larger part names the stage) down to MAX_SEGMENTS."""
    groups: list[Any]
    groups, changed_in_turn = [], False
    for step in steps:
        changed_in_turn = changed_in_turn and not step.first_of_turn
        stage = step_stage(step, changed_in_turn) or (groups[-1][0] if groups else "explore")
        changed_in_turn = changed_in_turn or stage == "execute"
        if groups and groups[-1][0] == stage:
            groups[-1][1].append(step)
        else:
            groups.append((stage, [step]))
    while len(groups) > MAX_SEGMENTS:
        sizes = [len(groups[i][1]) + len(groups[i + 1][1]) for i in range(len(groups) - 1)]
        i = sizes.index(min(sizes))
        (first, first_steps), (second, second_steps) = groups[i], groups[i + 1]
        groups[i: i + 2] = [(first if len(first_steps) >= len(second_steps) else second, first_steps + second_steps)]
    return [{"stage": stage, "description": describe(benchmark, stage, part), "start_step": part[0].index,
             "end_step": part[-1].index} for stage, part in groups]


def describe(benchmark, stage: str, part: list[Step]) -> str:
    """`<stage phrase> with <app.functions> for: <the user request>`."""
    names = list(dict.fromkeys(qualified_name(benchmark, call["name"]) for _, call, _ in executed(part)))
    using = f" with {', '.join(names)}" if names else ""
    return f"{_PHRASE[stage]}{using} for: {one_line(part[0].user, 160)}"


def rules_bullets(benchmark, record: dict, part: list[Step]) -> list[str]:
    """The segment's typed calls (✓ for a successful run, ✗ for a failed one), its errors, a validation cue, and
    general rules up to MIN_BULLETS."""
    calls = executed(part)
    typed = list(dict.fromkeys(typed_call(benchmark, call) for _, call, _ in calls))[:4]
    if outcome(record) == SUCCESS:
        bullets = [f"- {DO} Call {text}" for text in typed]
    else:
        bullets = [f"- {AVOID} A failed run called {text} here; check it against the request before repeating it"
                   for text in typed]
    for _, call, observation in calls:
        if is_error_observation(observation):
            bullets.append(f"- {AVOID} {qualified_name(benchmark, call['name'])} failed with "
                           f"\"{error_message(observation)}\"; check its arguments against the current state first")
    cue = _validation_cue(benchmark, calls)
    if cue and outcome(record) == SUCCESS:
        bullets.append(cue)
    for general in (f"- {DO} Take the values you pass on from the user or an earlier result, never guess them",
                    f"- {DO} Read each result for an error before the next call",
                    f"- {DO} Make only the calls this step of the request needs"):
        if len(bullets) < MIN_BULLETS:
            bullets.append(general)
    return list(dict.fromkeys(bullets))[:MAX_BULLETS]


def _validation_cue(benchmark, calls) -> str | None:
    for _, call, observation in reversed(calls):
        try:
            fields = json.loads(observation)
        except json.JSONDecodeError:
            continue
        if isinstance(fields, dict) and fields and not is_error_observation(observation):
            return (f"- {DO} {qualified_name(benchmark, call['name'])} reports {', '.join(list(fields)[:3])} "
                    "when it worked")
    return None


# ---- retrieval and injection ------------------------------------------------------------------------------------------

class StageHooks(BankHooks):
    def __init__(self, bank, config, settings):
        super().__init__(bank, config, settings)
        self.vectors = self.bank.vectors(STAGE)
        self.rows_by_stage = {stage: [row for row, entry in enumerate(self.bank.entries[STAGE])
                                      if entry["stage"] == stage] for stage in STAGES}

    def task_start(self, task: TaskContext) -> Injection:
        plan = student_plan(task)
        queries = self.embedder.embed([description for _, description in plan])
        seen: list[Any]
        blocks, records, seen = [], [], []
        for (stage, description), query in zip(plan, queries):
            hits = self.stage_search(stage, query, task, f"{stage}: {description}", seen)
            blocks += [f"[{stage} phase]\n{entry['experience']}" for entry, _ in hits]
            records += injection_records(STAGE, hits, f"{stage}: {description}")
        text = load_prompt("memory_block_sasm").format(experiences="\n\n".join(blocks)).strip() if blocks else ""
        return Injection(text, records, queries=seen)

    def stage_search(self, stage: str, query: np.ndarray, task: TaskContext, text: str,
                     queries: list) -> list[tuple[dict, float]]:
        """Top-k entries of `stage` only, by cosine to `query`, at least δ, never one the protocol hides from the
        task; `queries` gets what the search saw (`text`: the query's)."""
        excluded, entries = self.excluded(task), self.bank.entries[STAGE]
        rows = [row for row in self.rows_by_stage[stage] if not excluded.hides(entries[row])]
        delta = self.settings.delta[STAGE]
        ranked = sorted(zip(rows, (self.vectors[rows] @ query).tolist()), key=lambda pair: (-pair[1], pair[0]))
        found = [(row, score) for row, score in ranked if delta is None or score >= delta][: self.settings.k[STAGE]]
        queries.append(query_record(STAGE, text, len(found), ranked[0][1] if ranked else None))
        return [(entries[row], score) for row, score in found]


def student_plan(task: TaskContext) -> list[tuple[str, str]]:
    """(stage, description) per stage of the student's plan, first description per stage, in plan order; every
    stage with the instruction when there is no student or no usable plan (logged)."""
    plan: list[Any] = []
    if task.student:
        reply = task.student([{"role": "user", "content": load_prompt("sasm_plan").format(
            stages=load_prompt("sasm_stages"), instruction=task.instruction)}])
        items, _ = json_array_in(reply.text or "") if not reply.error else (None, False)
        for item in items or []:
            stage = str(item.get("stage", "")).strip().lower() if isinstance(item, dict) else ""
            description = " ".join(str(item.get("description", "")).split()) if isinstance(item, dict) else ""
            if stage in STAGES and description and not is_slot(description) and stage not in dict(plan):
                plan.append((stage, description))
        if not plan:
            log.warning("%s: stage plan unusable (%s); querying every stage with the instruction", task.task_id,
                        reply.error or repr((reply.text or "")[:80]))
    return plan or [(stage, task.instruction) for stage in STAGES]


class Sasm(PerTaskBaseline):
    """SASM as a registered method: stage-labelled experience per task, retrieved stage by stage."""

    name = "sasm"
    memory_type, embedded = STAGE, "description"
    distill = staticmethod(bank_entries)
    hooks = StageHooks

    def manifest_extra(self) -> dict[str, Any]:
        return {"stages": list(STAGES)}
