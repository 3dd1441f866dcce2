"""`--prompting json`: one JSON object per reply, its decoding constrained to the task's tool schemas.

The request carries a `response_format` of type json_schema (llama.cpp's server and vLLM turn it into a grammar;
OpenAI calls it structured outputs) whose schema admits exactly one of: a call of one of the task's tools,
`{"name": NAME, "arguments": {...}}` with that tool's own parameter schema (no extra parameters), or the final
answer, `{"answer": "..."}`. A small model can then neither write a runaway list of calls nor invent a function or
a parameter, and a reply ends as soon as its object closes. The benchmark still checks every call before it runs.
"""

import copy
import json
from typing import Any

from amd.benchmarks.base import Proposal
from amd.benchmarks.parsing import parse_reply

ANSWER = "answer"
REF_PREFIX = "#/$defs/"


def step_format(tools: list[dict]) -> dict:
    """The response_format of one step: a call of one of `tools` (OpenAI function tools) or the final answer."""
    definitions: dict[str, Any]
    choices, definitions = [], {}
    for tool in tools:
        function = tool["function"]
        arguments, own_definitions = _hoisted(function.get("parameters") or {"type": "object"}, function["name"])
        definitions |= own_definitions
        arguments.setdefault("type", "object")
        arguments["additionalProperties"] = False
        choices.append({"type": "object", "properties": {"name": {"const": function["name"]}, "arguments": arguments},
                        "required": ["name", "arguments"], "additionalProperties": False})
    choices.append({"type": "object", "properties": {ANSWER: {"type": "string"}}, "required": [ANSWER],
                    "additionalProperties": False})
    schema = {"anyOf": choices, **({"$defs": definitions} if definitions else {})}
    return {"type": "json_schema", "json_schema": {"name": "step", "schema": schema}}


def _hoisted(parameters: dict, tool_name: str) -> tuple[dict, dict]:
    """A copy of a tool's parameter schema without its own `$defs`, which move to the root under names prefixed
    with the tool's (each tool's schema is nested under the root's anyOf, where `#/$defs/...` means the root)."""
    parameters = copy.deepcopy(parameters)
    own = parameters.pop("$defs", {})
    renamed = {name: f"{tool_name}__{name}" for name in own}

    def rewrite(node):
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith(REF_PREFIX) and ref[len(REF_PREFIX):] in renamed:
                node["$ref"] = REF_PREFIX + renamed[ref[len(REF_PREFIX):]]
            for value in node.values():
                rewrite(value)
        elif isinstance(node, list):
            for value in node:
                rewrite(value)

    rewrite(parameters)
    rewrite(own)
    return parameters, {renamed[name]: schema for name, schema in own.items()}


def read_step(text: str) -> tuple[list[Proposal], str]:
    """(the call proposals, the text the turn ends with) of a json-mode reply: an answer object ends the turn
    with its answer; anything else is read as a call (a reply that is no call ends the turn as it is)."""
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if isinstance(value, dict) and set(value) == {ANSWER} and isinstance(value[ANSWER], str):
        return [], value[ANSWER]
    return parse_reply(text, []), text
