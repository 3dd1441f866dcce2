"""Turn a model reply into call proposals, without ever evaluating model text.

Native tool calls win. Otherwise the text is read for, in order:
- JSON: an object {"name": ..., "arguments": {...}} ("parameters" also accepted), a list of such objects, bare or
  inside ```json fences (several fences allowed);
- Python call syntax: `[f(a=1), g(b='x')]` or a line `f(a=1)`; `ast` only splits the source into calls, the
  environment parses and validates each call's source itself.
An item counts as a call only when it carries arguments. Small models echo the tool docs
({"name", "description", "parameters": {"type", "properties"}}) or report {"name", "result"}: those are not calls.

Code-action replies (`parse_code_reply`) carry Python in ```python fences; the code is handed to the environment,
which runs it in its own sandbox. It is never run here. `parse_first_code_block` takes the first block only, as the
ACE harness of the paper's release does (AppWorld's `code_blocks=first`).
"""

import ast
import json
import re

from amd.benchmarks.base import Proposal

FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.DOTALL)
OPEN_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n((?:(?!```).)*)\Z", re.DOTALL)  # never closed
CODE_LANGUAGES = {"python", "py", "python3", ""}
NO_CODE = "the reply has no ```python code block; write the code to run in one"
JSON_START = re.compile(r"[\[{]")
SCHEMA_TYPES = {"dict", "object"}


def parse_reply(text: str, tool_calls: list[dict]) -> list[Proposal]:
    if tool_calls:
        return [_native_call(call) for call in tool_calls]
    text = text or ""
    fenced = [call for m in FENCE.finditer(text) for call in _calls_in_block(m.group(2))]
    return fenced or _calls_in_block(text)


def _native_call(call: dict) -> Proposal:
    name, raw = call.get("name"), call.get("arguments") or "{}"
    source = json.dumps({"name": name, "arguments": raw}, ensure_ascii=False)
    arguments, malformed = _arguments_dict(raw)
    return Proposal(source=source, name=name, arguments=arguments, malformed=malformed)


def _calls_in_block(block: str) -> list[Proposal]:
    return _json_calls(block) or _python_calls(block)


# --- JSON -------------------------------------------------------------------------------------------------------

def _json_values(text: str):
    """Every JSON object or list embedded in the text, left to right, not overlapping."""
    decoder, i = json.JSONDecoder(), 0
    while (match := JSON_START.search(text, i)) is not None:
        try:
            value, end = decoder.raw_decode(text, match.start())
        except ValueError:
            i = match.start() + 1
            continue
        yield value
        i = end


def _json_calls(text: str) -> list[Proposal]:
    calls = []
    for value in _json_values(text):
        for item in value if isinstance(value, list) else [value]:
            if (proposal := _json_call(item)) is not None:
                calls.append(proposal)
    return calls


def _json_call(item) -> Proposal | None:
    if not isinstance(item, dict):
        return None
    if "name" not in item and isinstance(item.get("function"), dict):  # {"type": "function", "function": {...}}
        item = item["function"]
    name = item.get("name")
    if not isinstance(name, str) or not name or "result" in item:
        return None
    if "arguments" in item:
        arguments = item["arguments"]
    elif "parameters" in item:
        arguments = item["parameters"]
    else:
        return None
    if _is_schema(arguments):
        return None  # an echoed tool doc, not a call
    source = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    arguments, malformed = _arguments_dict(arguments)
    return Proposal(source=source, name=name, arguments=arguments, malformed=malformed)


def _is_schema(value) -> bool:
    return isinstance(value, dict) and value.get("type") in SCHEMA_TYPES and isinstance(value.get("properties"), dict)


def _arguments_dict(arguments) -> tuple[dict | None, str | None]:
    """(the arguments as a dict, None), decoding a JSON string; null means no arguments. Anything else is
    (None, why it cannot be read): the environment refuses the call instead of running it without arguments."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError as error:
            return None, f"the arguments are not valid JSON ({error})"
    if arguments is None:
        return {}, None
    if not isinstance(arguments, dict):
        return None, f"the arguments must be a JSON object, got {type(arguments).__name__}"
    return arguments, None


# --- Python call syntax -------------------------------------------------------------------------------------------

def _python_calls(text: str) -> list[Proposal]:
    whole = _call_list(text.strip())
    if whole is not None:
        return whole
    return [call for line in text.splitlines() for call in _call_list(line.strip()) or []]


def _call_list(source: str) -> list[Proposal] | None:
    """The calls of `f(...)` or `[f(...), g(...)]` as source segments; None when `source` is anything else."""
    if not source:
        return None
    try:
        node = ast.parse(source, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    items = node.elts if isinstance(node, (ast.List, ast.Tuple)) else [node]
    # Any call shape counts, even `__import__('os').system(...)`: the environment refuses it with an error
    # observation the model can read, and never executes it.
    if not items or not all(isinstance(n, ast.Call) for n in items):
        return None
    return [Proposal(source=ast.get_source_segment(source, n) or "") for n in items]



# --- code actions ---------------------------------------------------------------------------------------------------

def parse_code_reply(text: str) -> list[Proposal]:
    """One proposal: the reply's Python fenced blocks, joined in order; a reply with none is a malformed proposal
    (the environment refuses it with an observation the model can read)."""
    text = text or ""
    blocks = [m.group(2).strip() for m in FENCE.finditer(text) if m.group(1).lower() in CODE_LANGUAGES]
    code = "\n\n".join(block for block in blocks if block)
    if not code:
        return [Proposal(source=text, malformed=NO_CODE)]
    return [Proposal(source=code, code=code)]


def parse_first_code_block(text: str) -> tuple[list[Proposal], str]:
    """The reply's first Python block alone, and the reply up to that block's end (what the conversation keeps).
    A block the token limit cut before its closing fence runs as written, and the kept reply gets the fence."""
    text = text or ""
    for match in FENCE.finditer(text):
        code = match.group(2).strip()
        if match.group(1).lower() in CODE_LANGUAGES and code:
            return [Proposal(source=code, code=code)], text[: match.end()]
    opened = OPEN_FENCE.search(text)
    if opened and opened.group(1).lower() in CODE_LANGUAGES and (code := opened.group(2).strip()):
        return [Proposal(source=code, code=code)], text.rstrip() + "\n```"
    return [Proposal(source=text, malformed=NO_CODE)], text
