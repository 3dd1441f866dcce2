"""Memory entries as text blocks for the agent, in the prose or code representation (paper Table 4).

Entries store both renderings; the representation is chosen here, at render time, per memory type: the bank's
manifest names a default (`amd memory build --representation`, else the paper's best: workflow as prose, subtask
and function as code) and `load_memory_hooks(representation=...)` may override it. Blocks use
prompts/memory_block_*.md.
"""

from amd.errors import AmdError
from amd.prompts import load_prompt

DEFAULT_REPRESENTATION = {"workflow": "prose", "subtask": "code", "function": "code"}
REPRESENTATIONS = ("prose", "code")
TYPE_ALIASES = {"wf": "workflow", "st": "subtask", "fn": "function"}


def parse_representation(text: str) -> dict:
    """'wf=code,st=prose' (aliases or full type names) -> {"workflow": "code", "subtask": "prose"}."""
    chosen = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, form = item.partition("=")
        chosen[TYPE_ALIASES.get(name.strip(), name.strip())] = form.strip()
    return check_representation(chosen)


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
