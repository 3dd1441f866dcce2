"""How memory reaches the agent loop. `amd.memory` implements `MemoryHooks`; zero-shot runs pass None."""

from collections.abc import Callable
from typing import Protocol


class MemoryHooks(Protocol):
    def describe(self) -> dict:
        """The trajectory's `memory` field: config, bank, bank_sha256, protocol, k, delta."""

    def proactive(self, task_id: str, instruction: str,
                  decompose: Callable[[str], list[str]]) -> tuple[str, list[dict]]:
        """Text for the system prompt (after the tool docs) and its injection records, at task start.
        `decompose` asks the student for at most 6 subtask labels."""

    def per_turn(self, task_id: str, user_message: str) -> tuple[str, list[dict]]:
        """Text appended to a user turn (per-turn subtask retrieval) and its records; ("", []) when off."""

    def reactive(self, task_id: str, instruction: str, failing_functions: list[str]) -> tuple[str, list[dict]]:
        """A hint block appended after an error observation, and its records; ("", []) when nothing fits."""
