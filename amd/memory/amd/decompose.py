"""The student's subtask decomposition (paper Appendix C): instruction -> at most six verb-phrase labels."""

import logging

from amd.memory.writing import json_array_in
from amd.prompts import load_prompt

log = logging.getLogger("amd.memory")
MAX_LABELS = 6


def decompose_instruction(chat, instruction: str) -> list[str]:
    """Labels from `chat` (messages -> ChatReply) via prompts/decompose.md; [instruction] when the answer
    is not a JSON array of strings (logged)."""
    reply = chat([{"role": "user", "content": load_prompt("decompose").format(instruction=instruction)}])
    labels = None if reply.error else parse_labels(reply.text or "")
    if not labels:
        log.warning("decomposition unusable (%s); using the instruction as the only label",
                    reply.error or repr((reply.text or "")[:80]))
        return [instruction]
    if len(labels) > MAX_LABELS:
        log.info("decomposition gave %d labels; kept the first %d", len(labels), MAX_LABELS)
    return labels[:MAX_LABELS]


def parse_labels(text: str) -> list[str] | None:
    items, _ = json_array_in(text)
    if items is None:
        return None
    labels = [" ".join(item.split()) for item in items if isinstance(item, str) and item.strip()]
    return list(dict.fromkeys(labels)) or None
