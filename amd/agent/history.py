"""Keeping a code agent's conversation within a character budget (AppWorld's `history_chars`), as the ACE harness
the paper's release builds on does instead of letting an overflowing prompt fail the task.

What is sent is trimmed, never what the agent remembers: first the outputs of older steps are replaced by a short
marker (the last few messages keep theirs), then, while that is not enough, the oldest steps are dropped whole and
the task message says so. The system prompt and the task message are never trimmed.
"""

import copy

from amd.core.prompts import load_prompt

KEEP_RECENT = 5  # the last messages keep their content (ACE keeps the observations of its last 5 messages)


def trimmed(messages: list[dict], budget: int, head: int) -> list[dict]:
    """`messages` with what follows the first `head` of them cut to at most `budget` characters of content."""
    body = copy.deepcopy(messages[head:])
    if _size(body) <= budget:
        return messages
    hidden = load_prompt("observation_code").format(output=load_prompt("history_hidden_output").strip())
    for message in body[: max(0, len(body) - KEEP_RECENT)]:
        if _size(body) <= budget:
            break
        if message["role"] == "user":
            message["content"] = hidden
    dropped = 0
    while _size(body) > budget and len(body) > 2 and body[0]["role"] == "assistant":
        del body[:2]  # one step: the reply and its output
        dropped += 1
    start = copy.deepcopy(messages[:head])
    if dropped:
        start[-1]["content"] += "\n\n" + load_prompt("history_trimmed").format(steps=dropped).strip()
    return start + body


def _size(messages: list[dict]) -> int:
    return sum(len(message.get("content") or "") for message in messages)
