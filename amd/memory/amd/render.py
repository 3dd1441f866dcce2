"""AMD memory entries as text blocks for the agent, in the prose or code representation (paper Table 4).

Entries store both renderings; the representation is chosen here, at render time, per memory type: the bank's
manifest names a default (`amd memory build --option representation=...`, else the paper's best: workflow as
prose, subtask and function as code) and a run may override it (`--memory-option representation=...`). Blocks use
prompts/memory_block_*.md.
"""

from amd.errors import AmdError
from amd.prompts import load_prompt
from amd.vocabulary import AMD_TYPES, REPRESENTATIONS

DEFAULT_REPRESENTATION = {t.name: t.default_representation for t in AMD_TYPES}
_BY_CODE_OR_NAME = {key: t.name for t in AMD_TYPES for key in (t.code, t.name)}


def parse_representation(text) -> dict:
    """'wf=code,st=prose' (codes or type names), or such a dict -> {"workflow": "code", "subtask": "prose"}:
    only the types given, each checked."""
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
        if memory_type not in DEFAULT_REPRESENTATION or form not in REPRESENTATIONS:
            raise AmdError(f"bad memory representation {memory_type}={form!r}; types: "
                           f"{', '.join(DEFAULT_REPRESENTATION)}; forms: {', '.join(REPRESENTATIONS)}")
    return chosen


def render_workflow(entry: dict, form: str) -> str:
    return entry["insight"] if form == "prose" else f"```python\n{entry['code']}\n```"


def render_subtask(entry: dict, form: str) -> str:
    heading = f"### {entry['label']}\n{entry['description']}"
    body = f"```python\n{entry['code']}\n```" if form == "code" else entry["prose"]
    return f"{heading}\n{body}"


def render_function(entry: dict, form: str) -> str:
    return f"```python\n{entry['code']}\n```" if form == "code" else entry["prose"]


RENDERERS = {"workflow": render_workflow, "subtask": render_subtask, "function": render_function}


def render_block(memory_type: str, entries: list[dict], form: str) -> str:
    """The prompt block for `entries` of one type, or "" when there are none."""
    if not entries:
        return ""
    body = "\n\n".join(RENDERERS[memory_type](entry, form) for entry in entries)
    fields = {"entries": body}
    if memory_type == "function":
        fields["functions"] = ", ".join(dict.fromkeys(entry["name"] for entry in entries))
    return load_prompt(f"memory_block_{memory_type}").format(**fields).strip()
