"""AMD's writers turn one successful trajectory into a workflow insight and subtask segments.

`rules` is deterministic and model-free (templated from the calls, observations and turns); the model writer asks
any model spec through prompts/memory_workflow.md and prompts/memory_segment.md. A model answer that cannot be used
falls back to the rules result for that trajectory, with a log line on logger "amd.memory". `benchmark` is the
benchmark object (amd.benchmarks.base.Benchmark): it names each function's app and, where it has one, a label.
"""

import json
import logging
import re
from typing import Any

from amd.core.prompts import load_prompt
from amd.memory.placeholders import MAX_INSIGHT_WORDS, placeholder_for, scrub_free_text
from amd.memory.steps import Step, is_error_observation, one_line, qualified_name, render_steps_code
from amd.memory.writing import json_array_in, strip_fences

log = logging.getLogger("amd.memory")

MAX_SEGMENTS = 6
MAX_LABEL_WORDS = 5


# ---- workflow ----------------------------------------------------------------------------------------------

def executed_calls(steps: list[Step]) -> list[tuple[Step, dict, str]]:
    return [(step, call, obs) for step in steps for call, obs in step.call_observations()]


def call_sequence(benchmark, steps: list[Step]) -> list[str]:
    """Qualified names in call order, consecutive repeats collapsed."""
    names: list[Any] = []
    for _, call, _ in executed_calls(steps):
        name = qualified_name(benchmark, call["name"])
        if not names or names[-1] != name:
            names.append(name)
    return names


def rules_workflow(benchmark, steps: list[Step]) -> str:
    """Templated insight: apps and call order, one precondition, decision rule, validation cue, failure pattern."""
    calls = executed_calls(steps)
    if not calls:
        return ""
    names = call_sequence(benchmark, steps)
    apps = list(dict.fromkeys(name.rpartition(".")[0] for name in names if "." in name))
    tail = [_precondition(benchmark, calls), _decision_rule(benchmark, calls, steps),
            _validation_cue(benchmark, calls), _failure_pattern(benchmark, calls)]
    for shown in range(len(names), 0, -1):
        order = " -> ".join(names[:shown]) + (" -> ..." if shown < len(names) else "")
        opening = f"Use {', '.join(apps)}: call {order}." if apps else f"Call {order}."
        insight = " ".join([opening] + tail)
        if len(insight.split()) <= MAX_INSIGHT_WORDS:
            return insight
    return insight


def _typed_arguments(call: dict) -> str:
    return ", ".join(f"{key}={placeholder_for(value, key)}" for key, value in call["arguments"].items())


def _precondition(benchmark, calls) -> str:
    _, first, _ = calls[0]
    name = qualified_name(benchmark, first["name"])
    placeholders = sorted({placeholder_for(v, k) for k, v in first["arguments"].items() if not isinstance(v, bool)})
    if placeholders:
        return f"Precondition: have {', '.join(placeholders)} from the user request before calling {name}."
    return f"Precondition: call {name} first to read the current state."


def _decision_rule(benchmark, calls, steps) -> str:
    """A value that one call passed on from an earlier observation, else the turn structure."""
    seen: list[Any] = []
    for _, call, observation in calls:
        for key, value in call["arguments"].items():
            text = str(value)
            source = next((name for name, obs in seen if len(text) >= 2 and text in obs), None)
            if source and source != call["name"]:
                return (f"Decision rule: take {placeholder_for(value, key)} for "
                        f"{qualified_name(benchmark, call['name'])} from the result of "
                        f"{qualified_name(benchmark, source)}, never guess it.")
        seen.append((call["name"], observation))
    if len({step.turn for step in steps}) > 1:
        return "Decision rule: finish each user turn's request before the next one, building on the state it left."
    return "Decision rule: make only the calls the request needs, in the order above."


def _validation_cue(benchmark, calls) -> str:
    ok = [(call, obs) for _, call, obs in calls if not is_error_observation(obs)]
    if not ok:
        return "Validation cue: a call worked when its result carries no error field."
    call, observation = ok[-1]
    name = qualified_name(benchmark, call["name"])
    try:
        keys = list(json.loads(observation))[:3] if observation.strip().startswith("{") else []
    except json.JSONDecodeError:
        keys = []
    if keys:
        return f"Validation cue: {name} reports {', '.join(keys)} when it worked."
    return f"Validation cue: {name} returns without an error."


def _failure_pattern(benchmark, calls) -> str:
    for _, call, observation in calls:
        if is_error_observation(observation):
            message = " ".join(scrub_free_text(one_line(_error_message(observation), 200)).split()[:12])
            return (f"Failure pattern: {qualified_name(benchmark, call['name'])} failed with \"{message}\"; "
                    f"check its arguments against the current state before retrying.")
    return "Failure pattern: inventing values such as <ID> or <NAME> instead of reading them from the user or a result."


def _error_message(observation: str) -> str:
    try:
        parsed = json.loads(observation)
    except json.JSONDecodeError:
        return observation
    return str(parsed.get("error", observation)) if isinstance(parsed, dict) else observation


def workflow_code(benchmark, steps: list[Step], limit: int = 15) -> str:
    """Code representation of a workflow: the call skeleton with typed placeholders."""
    lines = [f"{qualified_name(benchmark, call['name'])}({_typed_arguments(call)})"
             for _, call, _ in executed_calls(steps)]
    return "\n".join(lines[:limit] + (["# ..."] if len(lines) > limit else []))


def model_workflow(chat, instruction: str, benchmark, steps: list[Step], prompt_name: str = "memory_workflow") \
        -> str | None:
    """The writer model's insight, or None (logged) when it gave no usable text."""
    prompt = load_prompt(prompt_name).format(
        instruction=instruction, functions=", ".join(call_sequence(benchmark, steps)),
        trajectory=render_steps_code(steps), max_words=MAX_INSIGHT_WORDS)
    reply = chat([{"role": "user", "content": prompt}])
    text = strip_fences(reply.text or "").strip()
    text = re.sub(r"^(insight|workflow)\s*:\s*", "", text, flags=re.IGNORECASE)
    if reply.error or not text:
        log.warning("workflow writer gave no usable text (%s); using the rules insight", reply.error or "empty")
        return None
    return " ".join(text.split())


# ---- subtask segments ----------------------------------------------------------------------------------------

def rules_segments(benchmark, steps: list[Step]) -> list[dict]:
    """A segment starts where a user turn starts and where the called app changes (the breakpoint hints the model
    writer gets); adjacent segments are merged (smallest pair first) down to at most six."""
    starts = {0} | {index for index, _ in _breakpoints(benchmark, steps)}
    groups: list[Any] = []
    for step in steps:
        if step.index in starts or not groups:
            groups.append([step])
        else:
            groups[-1].append(step)
    while len(groups) > MAX_SEGMENTS:
        sizes = [len(groups[i]) + len(groups[i + 1]) for i in range(len(groups) - 1)]
        i = sizes.index(min(sizes))
        groups[i: i + 2] = [groups[i] + groups[i + 1]]
    return [describe_segment(benchmark, group) for group in groups]


def describe_segment(benchmark, group: list[Step], label: str = "", description: str = "") -> dict:
    """A segment over `group` (consecutive steps); label and description made by rule where not given."""
    names = list(dict.fromkeys(qualified_name(benchmark, call["name"]) for _, call, _ in executed_calls(group)))
    if not label:  # named for the last call: earlier calls usually explore for it
        label = _verb_phrase(benchmark, names[-1].rpartition(".")[2]) if names else "answer the user"
    description = re.split(r"(?<=[.!?])\s", description.strip())[0]
    if not description:
        using = f" using {', '.join(names)}" if names else " without a tool call"
        description = f"{label.capitalize()} for the request \"{one_line(group[0].user, 160)}\"{using}."
    return {"start_step": group[0].index, "end_step": group[-1].index,
            "label": " ".join(label.split()[:MAX_LABEL_WORDS]), "description": description}


def _verb_phrase(benchmark, function_name: str) -> str:
    label = benchmark.function_info(function_name).label
    if label:
        return label
    words = [w for w in re.split(r"[_\W]+", function_name) if w]
    return " ".join(words[:MAX_LABEL_WORDS]).lower() or "call function"


def model_segments(chat, benchmark, steps: list[Step], task_id: str, prompt_name: str = "memory_segment") \
        -> list[dict]:
    """Segments from the writer model, repaired where possible, else the rules segments (logged)."""
    prompt = load_prompt(prompt_name).format(
        n_steps=len(steps), last_step=len(steps) - 1, steps=render_numbered_steps(steps),
        hints=breakpoint_hints(benchmark, steps), max_segments=MAX_SEGMENTS, max_label_words=MAX_LABEL_WORDS)
    reply = chat([{"role": "user", "content": prompt}])
    if reply.error:
        log.warning("%s: segment writer failed (%s); using rule segments", task_id, reply.error)
        return rules_segments(benchmark, steps)
    segments = repair_segments(reply.text or "", len(steps), task_id)
    if segments is None:
        return rules_segments(benchmark, steps)
    return [describe_segment(benchmark, steps[s["start_step"]: s["end_step"] + 1], s["label"], s["description"])
            for s in segments]


def render_numbered_steps(steps: list[Step]) -> str:
    lines = []
    for step in steps:
        if step.first_of_turn:
            lines.append(f"[turn {step.turn}] user: {one_line(step.user, 300)}")
        calls = "; ".join(f"{call['call']} -> {one_line(obs, 150)}" for call, obs in step.call_observations())
        if step.code is not None:
            calls = f"{one_line(step.code, 300)} -> {one_line((step.data.get('observations') or [''])[0], 150)}"
        lines.append(f"step {step.index}: {calls or 'reply without a call: ' + one_line(step.data['model_text'], 150)}")
    return "\n".join(lines)


def breakpoint_hints(benchmark, steps: list[Step]) -> str:
    """Candidate boundaries: where a user turn starts, and where the called app changes."""
    lines = [f"step {index}: {why}" for index, why in _breakpoints(benchmark, steps)]
    return "\n".join(lines) or "(no hints: a single turn with one app)"


def _breakpoints(benchmark, steps: list[Step]) -> list[tuple[int, str]]:
    """(step index, why) for every step where a segment may start (never step 0)."""
    hints, previous_app = [], None
    for step in steps:
        apps = [qualified_name(benchmark, c["name"]).rpartition(".")[0] for c in step.calls]
        if step.index > 0 and step.first_of_turn:
            hints.append((step.index, "a new user turn starts"))
        elif apps and previous_app and apps[0] and apps[0] != previous_app:
            hints.append((step.index, f"the calls switch from {previous_app} to {apps[0]}"))
        previous_app = apps[-1] if apps else previous_app
    return hints


def repair_segments(text: str, n_steps: int, task_id: str) -> list[dict] | None:
    """Parse the model's JSON array; fix fences, trailing text, overlaps, gaps and excess segments.
    Returns None (logged) when nothing usable is left."""
    items, trimmed = json_array_in(text)
    if items is None:
        log.warning("%s: segment writer answer is not a JSON array; using rule segments", task_id)
        return None
    if trimmed:
        log.info("%s: stripped fences or text around the segment JSON", task_id)
    segments = []
    for item in items:
        try:
            segments.append({"start_step": int(item["start_step"]), "end_step": int(item["end_step"]),
                             "label": str(item.get("label", "")).strip(),
                             "description": str(item.get("description", "")).strip()})
        except (KeyError, TypeError, ValueError):
            log.warning("%s: dropped a malformed segment %s", task_id, one_line(json.dumps(item), 120))
    segments = _fix_coverage(sorted(segments, key=lambda s: s["start_step"]), n_steps, task_id)
    if not segments:
        log.warning("%s: no usable segment in the writer answer; using rule segments", task_id)
        return None
    return segments


def _fix_coverage(segments: list[dict], n_steps: int, task_id: str) -> list[dict]:
    """Clip to the step range, cut overlaps, close gaps, merge down to MAX_SEGMENTS."""
    fixed: list[Any] = []
    for segment in segments:
        first = max(segment["start_step"], fixed[-1]["end_step"] + 1 if fixed else 0)
        last = min(segment["end_step"], n_steps - 1)
        if first > segment["start_step"] and first <= last:
            log.warning("%s: cut an overlap at step %d", task_id, segment["start_step"])
        if first > last:
            log.warning("%s: dropped a segment overlapping or outside the steps", task_id)
            continue
        if fixed and first > fixed[-1]["end_step"] + 1:
            log.warning("%s: closed a gap before step %d", task_id, first)
            fixed[-1]["end_step"] = first - 1
        fixed.append({**segment, "start_step": first, "end_step": last})
    if fixed and (fixed[0]["start_step"] != 0 or fixed[-1]["end_step"] != n_steps - 1):
        log.warning("%s: stretched the segments to cover every step", task_id)
        fixed[0]["start_step"], fixed[-1]["end_step"] = 0, n_steps - 1
    while len(fixed) > MAX_SEGMENTS:
        log.warning("%s: merged segments down to %d", task_id, MAX_SEGMENTS)
        sizes = [fixed[i + 1]["end_step"] - fixed[i]["start_step"] for i in range(len(fixed) - 1)]
        i = sizes.index(min(sizes))
        fixed[i: i + 2] = [{**fixed[i], "end_step": fixed[i + 1]["end_step"]}]
    return fixed
