"""MemP (Fang et al. 2025, arXiv 2508.06433; github zjunlp/MemP) as a registered memory method, in the form the
AMD authors ran it for the paper's Table 1 (their release: appworld/memp/generate_memp_memories.py,
appworld/memp/experiments/code/ace/memp/{memory_store,retriever}.py, memp_student_agent.py).

Build: one procedural entry per trajectory, successes and failures alike, marked as such: the task, 5-10 keywords
of the task, and a script of 5-15 numbered steps written from the run (prompts/memp_keywords.md,
prompts/memp_script.md; MemP's "direct" build of a procedure from a trajectory). The embedded key is the task
followed by its keywords, as in the release's AveFact entry text.
Run: MemP's AveFact retrieval. The student extracts 5-10 keywords from its task with the same keyword prompt (the
release's student config uses the student as `keyword_model`); each keyword is embedded and an entry's score is
the mean cosine between the keywords and the entry's key. With unit vectors that mean equals the inner product of
the entry's key with the mean keyword vector, so one FAISS search gives the exact AveFact ranking. The top-k
(k = 3, the release's `retrieval_top_k`) go into the system prompt as `[Memory i | SUCCESS/FAILURE] Task type:
...` followed by the script (prompts/memory_block_memp.md). The student never writes to memory, as in the
release's student agent; MemP's online update and deprecation are not part of the paper's protocol.

The `rules` writer (model-free) takes the keywords from the task's own words and numbers the run's typed calls as
the script; a student without usable keywords falls back to the same keyword rule (the release falls back to a
simple keyword heuristic too).
"""

import logging
import re
from collections import Counter
from typing import Any

import numpy as np

from amd.agent.hooks import Injection, TaskContext
from amd.core.prompts import load_prompt
from amd.core.trajectory import MemoryQuery
from amd.memory.baselines import (
    SUCCESS,
    PerTaskBaseline,
    ask_model,
    error_message,
    executed,
    first_error,
    is_slot,
    outcome,
    run_text,
    typed_call,
)
from amd.memory.method import BankHooks, injection_records
from amd.memory.steps import is_error_observation, steps_of
from amd.memory.writing import json_array_in

log = logging.getLogger("amd.memory")

PROCEDURE = "procedure"  # the memory type's name (its spec)
MIN_KEYWORDS, MAX_KEYWORDS = 5, 10
MIN_STEPS, MAX_STEPS = 5, 15
TASK_TYPE_CHARS = 100  # the release shows the first 100 characters of the source task
_NUMBERED = re.compile(r"^\s*(?:step\s*)?\d+\s*[.):]\s*(.+)$", re.IGNORECASE)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_'-]{2,}")
STOP_WORDS = frozenset({
    "the", "and", "for", "with", "that", "this", "from", "into", "then", "than", "them", "they", "their",
    "there", "these", "those", "what", "which", "who", "whom", "whose", "when", "where", "will", "would",
    "could", "should", "can", "may", "might", "must", "have", "has", "had", "been", "being", "are", "was",
    "were", "its", "you", "your", "yours", "our", "ours", "all", "any", "each", "some", "such", "not", "but",
    "also", "just", "only", "very", "more", "most", "other", "about", "above", "after", "again", "before",
    "below", "between", "both", "during", "over", "under", "until", "while", "please", "make", "sure", "let",
    "know", "need", "want", "like", "get", "use", "using"})


def bank_entries(record: dict, benchmark, chat=None) -> tuple[list[dict], Counter]:
    """One record's entry (in a list, as every baseline gives its entries) and its writer audit; `chat` (messages -> ChatReply) selects the model writer."""
    audit: Counter[str]
    audit, steps, task_id = Counter(), steps_of(record), record["task_id"]
    keywords = model_keywords(chat, record["instruction"], task_id, audit) if chat else None
    script = model_script(chat, record, steps, audit) if chat else None
    if chat:
        audit["writer_fallbacks"] += (keywords is None) + (script is None)
    keywords = keywords or rules_keywords(record["instruction"])
    entry = {"id": f"{PROCEDURE}:{task_id}:0", "type": PROCEDURE, "source_task_id": task_id,
             "task": record["instruction"], "keywords": keywords,
             "key": f"{record['instruction']} {' '.join(keywords)}", "success": outcome(record) == SUCCESS,
             "script": script or rules_script(benchmark, record, steps)}
    return [entry], audit


# ---- keywords (writer and student) ---------------------------------------------------------------------------------

def model_keywords(chat, task: str, task_id: str, audit: Counter | None = None) -> list[str] | None:
    """Keywords from `chat` via prompts/memp_keywords.md, at most MAX_KEYWORDS; None (logged) when unusable."""
    text = ask_model(chat, "memp_keywords", task_id, task=task, min_keywords=MIN_KEYWORDS,
                      max_keywords=MAX_KEYWORDS)
    items, trimmed = json_array_in(text or "")
    keywords = list(dict.fromkeys(" ".join(item.split()) for item in items or [] if isinstance(item, str)
                                  and item.strip() and not is_slot(item)))
    if not keywords:
        if text is not None:
            log.warning("%s: keyword answer has no JSON list of strings (%r); using the task's own words",
                        task_id, text[:80])
        return None
    if len(keywords) > MAX_KEYWORDS or trimmed:
        log.info("%s: kept %d keywords of the answer, without the text around them", task_id,
                 min(len(keywords), MAX_KEYWORDS))
        if audit is not None:
            audit["answers_repaired"] += 1
    return keywords[:MAX_KEYWORDS]


def rules_keywords(task: str) -> list[str]:
    """The task's distinct content words (stop words dropped), at most MAX_KEYWORDS; the task itself if none."""
    words = [word.lower().strip("'-") for word in _WORD.findall(task)]
    keywords = list(dict.fromkeys(word for word in words if word not in STOP_WORDS))
    return keywords[:MAX_KEYWORDS] or [" ".join(task.split())]


# ---- script ------------------------------------------------------------------------------------------------------

def model_script(chat, record: dict, steps, audit: Counter) -> str | None:
    task_id = record["task_id"]
    text = ask_model(chat, "memp_script", task_id, task=record["instruction"], outcome=outcome(record).upper(),
                      trajectory=run_text(steps), min_steps=MIN_STEPS, max_steps=MAX_STEPS)
    if text is None:
        return None
    lines = [match.group(1).strip() for match in map(_NUMBERED.match, text.splitlines()) if match]
    if not lines:
        log.warning("%s: script answer has no numbered step; using the rules script", task_id)
        return None
    if len(lines) > MAX_STEPS:
        log.warning("%s: script has %d steps; kept the first %d", task_id, len(lines), MAX_STEPS)
        audit["answers_repaired"] += 1
    return numbered(lines[:MAX_STEPS])


def rules_script(benchmark, record: dict, steps) -> str:
    """Read the request, the typed calls in order (an error noted where one came back), check, answer; for a
    failed run, what went wrong. Calls beyond the step limit are folded into one step."""
    calls: list[Any] = []
    for _, call, observation in executed(steps):
        text = f"Call {typed_call(benchmark, call)}"
        if is_error_observation(observation):
            text += f"; it can fail with \"{error_message(observation)}\", so check its arguments first"
        if not calls or calls[-1] != text:
            calls.append(text)
    room = MAX_STEPS - 4
    if len(calls) > room:
        calls[room - 1:] = ["Then " + "; ".join(text[0].lower() + text[1:] for text in calls[room - 1:])]
    lines = ["Read the request and note the values it gives (names, ids, amounts, paths)."] + calls + [
        "Pass on values from earlier results instead of guessing them.",
        "Check each result for an error before the next call."]
    if outcome(record) == SUCCESS:
        lines.append("Answer the user once every requested change is made.")
    else:
        error = first_error(benchmark, steps)
        lines.append(f"This run FAILED: {error[0]} returned \"{error[1]}\"; avoid repeating that call unchanged."
                     if error else "This run FAILED: its calls did not reach the requested end state; check "
                     "every request against the calls made before answering.")
    return numbered(lines)


def numbered(lines: list[str]) -> str:
    return "\n".join(f"{n}. {line}" for n, line in enumerate(lines, start=1))


# ---- retrieval and injection ----------------------------------------------------------------------------------------

class AveFactHooks(BankHooks):
    def task_start(self, task: TaskContext) -> Injection:
        keywords = student_keywords(task)
        mean_keyword = np.mean(self.embedder.embed(keywords), axis=0)  # unit vectors: mean cosine = dot with mean
        queries: list[MemoryQuery]
        query, queries = ", ".join(keywords), []
        hits = self.search_vector(PROCEDURE, mean_keyword, task, query, queries)
        return Injection(render_block([entry for entry, _ in hits]), injection_records(PROCEDURE, hits, query),
                         queries=queries)


def student_keywords(task: TaskContext) -> list[str]:
    """The student's keywords for its task; the task's own words without a student or a usable answer."""
    found = model_keywords(task.student, task.instruction, task.task_id) if task.student else None
    return found or rules_keywords(task.instruction)


def render_block(entries: list[dict]) -> str:
    if not entries:
        return ""
    memories = "\n\n".join(
        f"[Memory {n} | {'SUCCESS' if entry['success'] else 'FAILURE'}] Task type: "
        f"{entry['task'][:TASK_TYPE_CHARS]}\n{entry['script']}" for n, entry in enumerate(entries, start=1))
    return load_prompt("memory_block_memp").format(memories=memories).strip()


class Memp(PerTaskBaseline):
    """MemP as a registered method: one procedure per task, AveFact retrieval at task start."""

    name = "memp"
    memory_type, embedded = PROCEDURE, "key"
    distill = staticmethod(bank_entries)
    hooks = AveFactHooks
