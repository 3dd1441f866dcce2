"""Who writes memory: the `rules` writer (deterministic and model-free: a method's own templates) or a model writer
(any model spec, reached through amd.llm). Methods see `writer.chat`: None for rules, else messages -> ChatReply.
Also the reader every method uses for JSON in a model's answer."""

import json
import re

from amd.core.registry import WRITERS

RULES = "rules"


class RulesWriter:
    chat = None

    def __init__(self, spec: str = RULES, params: dict | None = None):
        self.spec = spec

    def describe(self) -> dict:
        return {"spec": RULES, "kind": "rules (deterministic, model-free templates)"}

    def usage(self) -> None:
        return None

    def close(self) -> None:
        pass


class ModelWriter:
    def __init__(self, spec: str, params: dict | None = None):
        from amd.llm import open_model

        self.spec, self.params = spec, dict(params or {})
        self.model = open_model(spec, self.params)
        self.chat = self.model.chat  # thread-safe

    def describe(self) -> dict:
        return {"spec": self.spec, "kind": "model", "params": self.params}

    def usage(self) -> dict:
        """What writing took: replies and their prompt and completion tokens, cached replies included (as a build
        with an empty cache would send them), so a rebuild from the cache writes the same manifest."""
        ledger = self.model.ledger
        return {"replies": ledger.replies, "prompt": ledger.prompt_tokens, "completion": ledger.completion_tokens,
                "cached_prompt": ledger.cached_prompt_tokens}

    def close(self) -> None:
        self.model.close()


def open_writer(spec: str, params: dict | None = None):
    """The writer for `spec`: `rules`, or any model spec."""
    return WRITERS.load(RULES if spec == RULES else "model")(spec, params)


def strip_fences(text: str) -> str:
    return re.sub(r"```[a-zA-Z]*", "", text)


def json_array_in(text: str) -> tuple[list | None, bool]:
    """The JSON array in a model answer, ignoring code fences and text around it (None when there is none), and
    whether anything around it was dropped."""
    body = strip_fences(text)
    start, end = body.find("["), body.rfind("]")
    try:
        items = json.loads(body[start: end + 1]) if 0 <= start < end else None
    except json.JSONDecodeError:
        items = None
    if not isinstance(items, list):
        return None, False
    return items, start > 0 or bool(body[end + 1:].strip()) or body != text
