"""ReasoningBank (Ouyang et al. 2025, arXiv 2509.25140; github google-research/reasoning-bank) as a registered
memory method, in the form the AMD authors ran it for the paper's Table 1.

Build: one entry per trajectory, successes and failures alike: the task instruction (embedded: the retrieval
key), the outcome, and at most three memory items {title, description, content} written with a success or a
failure prompt (prompts/reasoningbank_{success,failure}.md, our wording of the originals' two extraction prompts,
WebArena/prompts/memory_instruction.py: at most 3 items, no overlap, no task-specific values). The entry shape
{task, outcome, <= 3 items} is the AMD authors' (appworld/rb/experiments/code/ace/reasoning_bank.py).
Run: at task start, the top-k entries by cosine(instruction, entry instruction) — k = 3 as in the authors'
configs (`top_k: 3`; the original retrieves n = 1) — their items numbered and flattened into the system prompt
(prompts/memory_block_reasoningbank.md), as the authors' adaptation does with up to 9 items.

The `rules` writer (model-free) fills the items from templates: the call order with typed placeholders, how an
error was recovered from, and for a failed run the call that failed.
"""

import logging
import re
from collections import Counter
from typing import Any

from amd.agent.hooks import Injection, TaskContext
from amd.core.prompts import load_prompt
from amd.memory.baselines import (
    SUCCESS,
    PerTaskBaseline,
    apps_used,
    ask_model,
    call_order,
    error_message,
    executed,
    first_error,
    outcome,
    run_text,
)
from amd.memory.method import BankHooks, injection_records
from amd.memory.steps import is_error_observation, qualified_name, steps_of

log = logging.getLogger("amd.memory")

REASONING = "reasoning"  # the memory type's name (its spec)
MAX_ITEMS = 3
FIELDS = ("title", "description", "content")
_SECTION = re.compile(r"^\s*#{2,}\s*(title|description|content)\b\s*:?\s*(.*)$", re.IGNORECASE)
_ITEM_HEADING = re.compile(r"^\s*#\s*memory item\b", re.IGNORECASE)


def bank_entries(record: dict, benchmark, chat=None) -> tuple[list[dict], Counter]:
    """One record's entry (in a list, as every baseline gives its entries) and its writer audit; `chat` (messages -> ChatReply) selects the model writer."""
    audit: Counter[str] = Counter()
    steps = steps_of(record)
    items = model_items(chat, record, steps, audit) if chat else None
    if chat and items is None:
        audit["writer_fallbacks"] += 1
    task_id = record["task_id"]
    entry = {"id": f"{REASONING}:{task_id}:0", "type": REASONING, "source_task_id": task_id,
             "query": record["instruction"], "outcome": outcome(record),
             "items": items or rules_items(benchmark, record, steps)}
    return [entry], audit


# ---- model writer --------------------------------------------------------------------------------------------------

def model_items(chat, record: dict, steps, audit: Counter) -> list[dict] | None:
    prompt = f"reasoningbank_{outcome(record)}"
    text = ask_model(chat, prompt, record["task_id"], instruction=record["instruction"],
                      trajectory=run_text(steps), max_items=MAX_ITEMS)
    return None if text is None else repair_items(text, record["task_id"], audit)


def repair_items(text: str, task_id: str, audit: Counter) -> list[dict] | None:
    """Memory items from the writer's Markdown: fences and headings tolerated, an item without content dropped,
    a missing title taken from its description, at most MAX_ITEMS kept. None (logged) when no item is left."""
    items = [item for item in parse_items(text) if item["content"]]
    repaired = 0
    for item in items:
        if not item["title"]:
            item["title"] = " ".join((item["description"] or item["content"]).split()[:6])
            repaired += 1
    if len(items) > MAX_ITEMS:
        log.warning("%s: the writer gave %d memory items; kept the first %d", task_id, len(items), MAX_ITEMS)
        items, repaired = items[:MAX_ITEMS], repaired + 1
    if not items:
        log.warning("%s: no memory item with content in the writer answer; using the rules items", task_id)
        return None
    if repaired:
        log.info("%s: repaired the writer's memory items", task_id)
        audit["answers_repaired"] += 1
    return items


def parse_items(text: str) -> list[dict]:
    """`## Title/Description/Content` sections in order; an item starts at `# Memory Item` or a repeated field."""
    items, field = [], None
    for line in text.replace("```markdown", "").replace("```", "").splitlines():
        section = _SECTION.match(line)
        if _ITEM_HEADING.match(line):
            items.append(dict.fromkeys(FIELDS, ""))
            field = None
        elif section:
            field = section.group(1).lower()
            if not items or items[-1][field]:
                items.append(dict.fromkeys(FIELDS, ""))
            items[-1][field] = section.group(2).strip()
        elif field and line.strip():
            items[-1][field] = f"{items[-1][field]} {line.strip()}".strip()
    return items


# ---- rules writer ----------------------------------------------------------------------------------------------------

def rules_items(benchmark, record: dict, steps) -> list[dict]:
    """Templated items: for a success the call order and any recovery from an error; for a failure the call that
    failed (or the unfinished request) and the calls to check."""
    apps = ", ".join(apps_used(benchmark, steps)) or "the available tools"
    order = call_order(benchmark, steps)
    if outcome(record) == SUCCESS:
        items = [_item("Follow the proven call order", f"Use when a request is served by {apps}.",
                       f"A successful run called {order}; read each value you pass on from the user or an earlier "
                       "result, never guess it.")]
        recovery = _recovery(benchmark, steps)
        if recovery:
            items.append(recovery)
    else:
        error = first_error(benchmark, steps)
        if error:
            items = [_item(f"Avoid the failing {error[0]} call", f"Use before calling {error[0]}.",
                           f"A failed run got \"{error[1]}\" from {error[0]}; check its arguments against the "
                           "current state before calling it, and do not repeat the same call.")]
        else:
            items = [_item("Finish every requested change", f"Use when a request is served by {apps}.",
                           f"A run that called {order} was still judged wrong; compare each user request with the "
                           "calls made before answering.")]
    if len(record["turns"]) > 1:
        items.append(_item("Build on the previous turns", "Use when the user adds requests over several turns.",
                           f"The task had {len(record['turns'])} user turns; each turn's calls act on the state the "
                           "previous turns left, so read that state instead of starting over."))
    return items[:MAX_ITEMS]


def _recovery(benchmark, steps) -> dict | None:
    """An item on an error that a later call of the same function got past."""
    calls = executed(steps)
    for index, (_, call, observation) in enumerate(calls):
        if is_error_observation(observation) and any(later["name"] == call["name"] and
                                                     not is_error_observation(later_observation)
                                                     for _, later, later_observation in calls[index + 1:]):
            name = qualified_name(benchmark, call["name"])
            return _item(f"Recover when {name} fails", f"Use when {name} returns an error.",
                         f"{name} failed with \"{error_message(observation)}\"; the run recovered by correcting "
                         "the arguments from the current state and calling it again.")
    return None


def _item(title: str, description: str, content: str) -> dict:
    return {"title": title, "description": description, "content": content}


# ---- retrieval and injection -------------------------------------------------------------------------------------------

class ReasoningHooks(BankHooks):
    def task_start(self, task: TaskContext) -> Injection:
        queries: list[Any] = []
        hits = self.search(REASONING, task.instruction, task, queries)
        return Injection(render_block([entry for entry, _ in hits]),
                         injection_records(REASONING, hits, task.instruction), queries=queries)


def render_block(entries: list[dict]) -> str:
    """The retrieved entries' items, numbered across entries, in the originals' Markdown item form."""
    items = [item for entry in entries for item in entry["items"]]
    if not items:
        return ""
    body = "\n\n".join(f"# Memory Item {n}\n## Title {item['title']}\n## Description {item['description']}\n"
                       f"## Content {item['content']}" for n, item in enumerate(items, start=1))
    return load_prompt("memory_block_reasoningbank").format(items=body).strip()


class ReasoningBank(PerTaskBaseline):
    """ReasoningBank as a registered method: one entry of memory items per task, retrieved by the instruction."""

    name = "reasoningbank"
    memory_type, embedded = REASONING, "query"
    distill = staticmethod(bank_entries)
    hooks = ReasoningHooks
