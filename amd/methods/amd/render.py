"""AMD memory entries as text blocks for the agent, in the prose or code representation (paper Table 4).

Entries store both renderings; the representation is chosen here, at render time, per memory type: the bank's
manifest names a default (`amd memory build --option representation=...`, else the paper's best: workflow as
prose, subtask and function as code) and a run may override it (`--memory-option representation=...`). Blocks use
prompts/memory_block_*.md. Beyond the paper, function memory has a compressed form, `signature`: one line per
function, a call that worked with the start of its result (the student has the tool docs already; what memory
adds is the argument names and value formats that worked).
"""

import json
from collections.abc import Iterable
from typing import Any

from amd.core.errors import AmdError
from amd.core.prompts import load_prompt
from amd.memory.steps import one_line
from amd.methods.amd.spec import AMD_TYPES, DEFAULT_REPRESENTATION, REPRESENTATIONS

SIGNATURE = "signature"
FORMS = {t.name: (*REPRESENTATIONS, SIGNATURE) if t.name == "function" else REPRESENTATIONS for t in AMD_TYPES}
SIGNATURE_RESULT_CHARS = 80
_BY_CODE_OR_NAME = {key: t.name for t in AMD_TYPES for key in (t.code, t.name)}


def parse_representation(text) -> dict:
    """'wf=code,st=prose' (codes or type names), or such a dict -> {"workflow": "code", "subtask": "prose"}:
    only the types given, each checked."""
    items: Iterable[tuple[Any, Any]]
    if isinstance(text, dict):
        items = text.items()
    else:
        items = [item.partition("=")[::2] for item in filter(None, (part.strip() for part in str(text).split(",")))]
    chosen = {}
    for key, form in items:
        key, form = key.strip(), str(form).strip()
        if key not in _BY_CODE_OR_NAME:
            raise AmdError(f"bad memory representation {key}={form!r}; types: {', '.join(_BY_CODE_OR_NAME)}")
        chosen[_BY_CODE_OR_NAME[key]] = form
    check_representation(chosen)
    return chosen


def check_representation(representation: dict | None, base: dict | None = None) -> dict:
    chosen = {**DEFAULT_REPRESENTATION, **(base or {}), **(representation or {})}
    for memory_type, form in chosen.items():
        if memory_type not in FORMS or form not in FORMS[memory_type]:
            raise AmdError(f"bad memory representation {memory_type}={form!r}; types: {', '.join(FORMS)}; forms: "
                           + "; ".join(f"{name}: {', '.join(forms)}" for name, forms in FORMS.items()))
    return chosen


def render_workflow(entry: dict, form: str) -> str:
    return entry["insight"] if form == "prose" else f"```python\n{entry['code']}\n```"


def render_subtask(entry: dict, form: str, calls: int | None = None) -> str:
    """A segment under its label and description; `calls` (code form): only its first `calls` calls, without
    observations or user turns (0: every call)."""
    heading = f"### {entry['label']}\n{entry['description']}"
    code = entry["code"] if calls is None else segment_calls(entry["code"], calls)
    body = f"```python\n{code}\n```" if form == "code" else entry["prose"]
    return f"{heading}\n{body}"


def segment_calls(code: str, limit: int) -> str:
    """The call lines of a segment's code (its `#` comments, the observations and user turns, left out), at most
    `limit` of them (0: all)."""
    lines = [line for line in code.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return "\n".join(lines[:limit] if limit else lines)


def render_function(entry: dict, form: str) -> str:
    return f"```python\n{entry['code']}\n```" if form == "code" else entry["prose"]


def signature_lines(entries: list[dict]) -> str:
    """One line per function: its first (best-ranked) entry's call and the start of that call's result."""
    first: dict[str, Any] = {}
    for entry in entries:
        first.setdefault(entry["name"], entry)
    return "\n".join(f"- {' '.join(entry['call'].splitlines())} -> "
                     f"{one_line(entry['observation'], SIGNATURE_RESULT_CHARS)}" for entry in first.values())


RENDERERS = {"workflow": render_workflow, "subtask": render_subtask, "function": render_function}


def function_docs(entries: list[dict]) -> str:
    """Each function's stored doc, once per function (its argument and response schema, where the benchmark has
    one: AppWorld's API docs)."""
    docs = {entry["name"]: entry["doc"] for entry in entries if entry.get("doc")}
    return "\n\n".join(load_prompt("memory_function_doc").format(
        function=name, doc=json.dumps(doc, ensure_ascii=False, separators=(",", ":"))).strip()
        for name, doc in docs.items())


def render_block(memory_type: str, entries: list[dict], form: str, with_doc: bool = False,
                 subtask_calls: int | None = None) -> str:
    """The prompt block for `entries` of one type, or "" when there are none; `with_doc`: function entries with
    their functions' docs; `subtask_calls`: subtask segments as their calls only (render_subtask)."""
    if not entries:
        return ""
    if form == SIGNATURE:
        body = signature_lines(entries)
    elif memory_type == "subtask":
        body = "\n\n".join(render_subtask(entry, form, subtask_calls) for entry in entries)
    else:
        body = "\n\n".join(RENDERERS[memory_type](entry, form) for entry in entries)
    if with_doc and memory_type == "function" and (docs := function_docs(entries)):
        body = f"{body}\n\n{docs}"
    fields = {"entries": body}
    if memory_type == "function":
        fields["functions"] = ", ".join(dict.fromkeys(entry["name"] for entry in entries))
    return load_prompt(f"memory_block_{memory_type}").format(**fields).strip()
