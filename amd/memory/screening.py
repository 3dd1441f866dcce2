"""Entries whose text reads as an instruction to the agent: the marks of prompt injection.

A teacher that ran under attack carries the attacker's text in its observations (a tool returned it), and
distilling the trajectory puts that text in memory, where every student that retrieves the entry reads it. A build
counts such entries (the manifest's `instruction_like`: how many, by mark, which) and names them in a warning line;
it keeps them. A run shows every entry delimited and labelled as retrieved data (amd.agent.hooks).

The marks are those of AgentDojo's attacks (its `important_instructions`, `tool_knowledge` and denial-of-service
texts, `ignore_previous`, `injecagent`, `system_message` and `direct`) and the common phrasing they share; a mark is
a reason to look, not a verdict.
"""

import re
from collections import Counter
from typing import TypedDict

MARKS = {
    "information_block": re.compile(r"<\s*/?\s*INFORMATION\s*>"),
    "important_message": re.compile(r"this is an important message from me", re.IGNORECASE),
    "before_you_can_solve": re.compile(r"before you can solve the task that i gave you", re.IGNORECASE),
    # No word boundary before a mark: observations are often a dict's repr, where a line break is the two characters
    # `\n` ("...help\nIgnore your..."). "iunstructions": AgentDojo's ignore_previous text has the typo.
    "ignore_previous": re.compile(r"(?:ignore|disregard|forget)\s+(?:all\s+|any\s+|your\s+|the\s+)*"
                                  r"(?:previous|prior|above|earlier)\s+i\w*nstructions", re.IGNORECASE),
    "system_message": re.compile(r"#+\s*\(\s*system[_ ]message\s*\)", re.IGNORECASE),
    "todo": re.compile(r"(?:^|\\n|[^\w])TODO:\s"),
}


def marks_in(text: str) -> list[str]:
    """The names of the marks `text` carries, in MARKS' order."""
    return [name for name, pattern in MARKS.items() if pattern.search(text)]


def _texts(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _texts(item)]
    if isinstance(value, list):
        return [text for item in value for text in _texts(item)]
    return []


class Screened(TypedDict):
    """The manifest's `instruction_like`."""

    count: int  # entries with a mark
    of: int  # entries screened
    by_mark: dict[str, int]
    entries: list[str]  # the ids of those with a mark


def instruction_like(entries: dict[str, list[dict]]) -> Screened:
    """The manifest's `instruction_like`: how many entries carry a mark in any of their text fields, how many carry
    each mark, and their ids (in type and entry order)."""
    found = {entry["id"]: marks_in("\n".join(_texts(entry))) for type_entries in entries.values()
             for entry in type_entries}
    flagged = {entry_id: marks for entry_id, marks in found.items() if marks}
    by_mark = Counter(mark for marks in flagged.values() for mark in marks)
    return {"count": len(flagged), "of": len(found), "by_mark": {name: by_mark[name] for name in MARKS if by_mark[name]},
            "entries": list(flagged)}
