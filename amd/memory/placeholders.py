"""Typed placeholders for concrete values, and the audit that keeps a trajectory's values out of its insight.

The audit collects the concrete argument values of a trajectory's calls (strings of 3+ characters, numbers with
2+ digits, found recursively in lists and dicts), replaces any that survive in the insight by their typed
placeholder, and rejects an insight that the repair leaves unusable (over the word limit, or naming no function).
Neither the paper nor its release audits insights (their prompts ask for placeholders and function names): with
`repair` off, an insight keeps its values and is kept naming no function; the word limit still applies.

Value masking (`ValueMask`, the build option `entry_values`) puts the same placeholders into subtask and function entries,
as the authors' release does for BFCL (each argument value of a stored call) and ToolSandbox (arguments, and the
results scrubbed): `masked` writes each call with typed placeholders for its argument values and replaces the
trajectory's argument values wherever else the entry quotes them (a user turn, a segment's description, a code
block); `scrubbed` also scrubs the observations; `raw` (amd's default) keeps every value.
"""

import json
import re
from dataclasses import dataclass
from typing import Any

from amd.benchmarks.base import canonical_call

MAX_INSIGHT_WORDS = 120

_EMAIL = re.compile(r"^[\w.+-]+@[\w-]+(\.[\w-]+)+$")
_IBAN = re.compile(r"^[A-Z]{2}\d{2}[A-Z0-9]{11,30}$")
_URL = re.compile(r"^(https?://|www\.)\S+$", re.IGNORECASE)
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}|^\d{1,2}/\d{1,2}/\d{2,4}$|^\d{1,2}:\d{2}")
_PATH = re.compile(r"/|\\|^[\w-]+\.[A-Za-z0-9]{1,5}$")
_ID_LIKE = re.compile(r"^(?=.*\d)[A-Za-z0-9_-]{3,}$")
_ID_KEYS = {"id", "ids"}  # an argument name ending in one of these (file_id, event_id) names an id
_KEY_TYPES = [  # words of an argument name -> placeholder, checked in this order
    ({"email", "mail"}, "<EMAIL>"),
    ({"url", "link", "website", "webpage"}, "<URL>"),
    ({"path", "file", "dir", "directory", "folder", "filename"}, "<FILE_PATH>"),
    ({"password", "token", "secret", "pin", "passcode"}, "<PASSWORD>"),
    ({"date", "time", "timestamp", "day"}, "<DATE>"),
    ({"id", "ids", "userid"}, "<ID>"),
    ({"amount", "price", "cost", "budget", "balance", "value"}, "<AMOUNT>"),
    ({"name", "user", "recipient", "receiver", "contact", "username"}, "<NAME>"),
]


def placeholder_for(value, key: str = "") -> str:
    """The typed placeholder of one concrete value; the argument name helps where the value alone is ambiguous."""
    if isinstance(value, bool):
        return "<BOOL>"
    text = str(value)
    for pattern, placeholder in ((_EMAIL, "<EMAIL>"), (_IBAN, "<IBAN>"), (_URL, "<URL>")):
        if pattern.match(text):
            return placeholder
    if isinstance(value, str) and _DATE.match(text):
        return "<DATE>"
    key_words = key.lower().split("_")
    if key_words[-1] in _ID_KEYS:
        return "<ID>"
    for words, placeholder in _KEY_TYPES:
        if words.intersection(key_words):
            return placeholder
    if isinstance(value, (int, float)):
        return "<NUMBER>"
    if _PATH.search(text):
        return "<FILE_PATH>"
    if _ID_LIKE.match(text):
        return "<ID>"
    return "<TEXT>"


def concrete_values(arguments: dict) -> list[tuple[str, str]]:
    """(value text, placeholder) for every value of a call's arguments that the insight must not carry."""
    found = []

    def visit(value, key):
        if isinstance(value, dict):
            for inner_key, inner in value.items():
                visit(inner, inner_key)
        elif isinstance(value, (list, tuple, set)):
            for inner in value:
                visit(inner, key)
        elif isinstance(value, bool) or value is None:
            return
        elif isinstance(value, (int, float)):
            if sum(ch.isdigit() for ch in repr(value)) >= 2:
                found.append((repr(value), placeholder_for(value, key)))
                if isinstance(value, float) and value.is_integer():  # 100.0 may be written 100
                    found.append((str(int(value)), placeholder_for(value, key)))
        elif isinstance(value, str) and len(value.strip()) >= 3:
            found.append((value.strip(), placeholder_for(value.strip(), key)))

    visit(arguments, "")
    return found


def trajectory_values(calls: list[dict]) -> list[tuple[str, str]]:
    """Concrete values of all calls, longest first (so a value is replaced before any value it contains)."""
    unique: dict[str, Any] = {}
    for call in calls:
        for text, placeholder in concrete_values(call["arguments"]):
            unique.setdefault(text, placeholder)
    return sorted(unique.items(), key=lambda item: -len(item[0]))


def _pattern(value: str) -> re.Pattern:
    # Not inside a word, a dotted name (app.function) or a placeholder.
    return re.compile(r"(?<![\w.<])" + re.escape(value) + r"(?![\w>])", re.IGNORECASE)


@dataclass
class AuditResult:
    text: str
    repaired: int  # values replaced
    rejected: bool
    reason: str = ""
    trimmed: bool = False  # cut to the word limit (trim=True)


def audit_insight(insight: str, calls: list[dict], function_names: list[str], trim: bool = False,
                  repair: bool = True, keep_long: bool = False) -> AuditResult:
    """Replace every surviving concrete value by its placeholder; reject when the result is unusable.
    `function_names` are the trajectory's `app.function_name` forms; the insight must keep at least one. An
    insight over the word limit is rejected, or with `trim` cut to it (`trimmed`: the release asks for fewer than
    120 words and keeps what it gets), or with `keep_long` kept whole. Without `repair` (the paper's way), values stay
    and no function is required."""
    repaired = 0
    for value, placeholder in trajectory_values(calls) if repair else ():
        insight, count = _pattern(value).subn(placeholder, insight)
        repaired += count
    words = len(insight.split())
    trimmed = trim and words > MAX_INSIGHT_WORDS
    if trimmed:
        insight = trim_to_words(insight, MAX_INSIGHT_WORDS)
    elif words > MAX_INSIGHT_WORDS and not keep_long:
        return AuditResult(insight, repaired, True, f"{words} words (limit {MAX_INSIGHT_WORDS})")
    if repair and function_names and not any(name in insight for name in function_names):
        return AuditResult(insight, repaired, True, "names no app.function_name", trimmed)
    return AuditResult(insight, repaired, False, trimmed=trimmed)


def trim_to_words(text: str, limit: int) -> str:
    """The longest run of whole sentences within `limit` words, else the first `limit` words."""
    kept: list[Any] = []
    for sentence in re.split(r"(?<=[.!?])\s+", text.strip()):
        if len(" ".join([*kept, sentence]).split()) > limit:
            break
        kept.append(sentence)
    return " ".join(kept) if kept else " ".join(text.split()[:limit])


def scrub_free_text(text: str) -> str:
    """Generic scrub for text that is not an argument (error messages): quoted strings, emails, paths, numbers."""
    text = re.sub(r"[\w.+-]+@[\w-]+(\.[\w-]+)+", "<EMAIL>", text)
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "<TEXT>", text)
    text = re.sub(r"(?<!\w)(/[\w.-]+)+/?", "<FILE_PATH>", text)
    text = re.sub(r"\b(?=[A-Za-z_-]*\d)(?=\d*[A-Za-z])[\w-]{3,}\b", "<ID>", text)
    return re.sub(r"\d[\d.,]*\d", "<NUMBER>", text)


VALUE_MODES = ("raw", "masked", "scrubbed")  # the build option `entry_values`: see ValueMask


def masked_arguments(arguments: dict, known: dict[str, str] | None = None) -> dict:
    """The arguments with every string and number replaced by its typed placeholder (`known`: value text ->
    placeholder, so one value gets one placeholder across a trajectory); booleans and None are kept (they choose a
    behaviour, not a value), lists and dicts are masked inside."""

    def mask(value, key):
        if isinstance(value, dict):
            return {inner_key: mask(inner, inner_key) for inner_key, inner in value.items()}
        if isinstance(value, (list, tuple)):
            return [mask(inner, key) for inner in value]
        if isinstance(value, bool) or value is None:
            return value
        text = value.strip() if isinstance(value, str) else repr(value)
        return (known or {}).get(text) or placeholder_for(value, key)

    return {key: mask(value, key) for key, value in arguments.items()}


class ValueMask:
    """How an entry shows the values of one trajectory's calls (`mode`: raw, masked or scrubbed; VALUE_MODES)."""

    def __init__(self, mode: str = "raw", calls: list[dict] | None = None):
        if mode not in VALUE_MODES:
            raise ValueError(f"value mode {mode!r} is not one of {', '.join(VALUE_MODES)}")
        self.mode = mode
        self._values = trajectory_values(calls or []) if mode != "raw" else []
        self._known = dict(self._values)

    def call(self, call: dict) -> str:
        """The call as stored: its own text, or with typed placeholders for its argument values."""
        if self.mode == "raw":
            return call["call"]
        return canonical_call(call["name"], masked_arguments(call["arguments"], self._known))

    def text(self, text: str) -> str:
        """Text that may quote the trajectory's values (a user turn, a description, a code block)."""
        for value, placeholder in self._values:
            text = _pattern(value).sub(placeholder, text)
        return text

    def observation(self, text: str) -> str:
        """An observation: under `scrubbed`, a JSON result with its values masked (its keys kept), any other text
        scrubbed (the trajectory's values, then quoted strings, emails, paths, ids, numbers); else as it was."""
        if self.mode != "scrubbed":
            return text
        try:
            parsed = json.loads(text)
        except ValueError:
            return scrub_free_text(self.text(text))
        if not isinstance(parsed, (dict, list)):
            return scrub_free_text(self.text(text))
        masked = masked_arguments({"": parsed}, self._known)[""]
        return json.dumps(masked, ensure_ascii=False)


RAW = ValueMask()
