"""A tiny benchmark behind the real protocol, for testing the loop and runner without a real benchmark; also the
toy benchmark that tests/test_plugins.py adds to a copy of the tree as a module plus a registry line.

Task "count_N_I": N user turns; in each the agent must call add(n=1) once. Success = the counter equals N. Tasks
with the same N are variants of one scenario (task group "count_N").
"""

import json
from typing import Any, final

from amd.api import Benchmark, Episode, ExecutedCall, Proposal, StepOutcome, Verdict

TOOLS = [{"type": "function", "function": {
    "name": "add", "description": "Add n to the counter.",
    "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}}]


@final
class CounterEpisode(Episode):
    def __init__(self, task_id: str, turns: int):
        self.task_id = task_id
        self.instruction = "Add one to the counter."
        self.tools = TOOLS
        self.turns = turns
        self.turn = 0
        self.counter = 0
        self.decoded: list[list[list[str]]] = []

    def next_user_message(self, last_agent_reply: str | None) -> str | None:
        if self.turn >= self.turns:
            return None
        self.turn += 1
        self.decoded.append([])
        return f"Turn {self.turn}: add one to the counter."

    def execute(self, proposals: list[Proposal]) -> StepOutcome:
        outcome = StepOutcome()
        step_calls = []
        for proposal in proposals:
            arguments = proposal.arguments or {}
            if proposal.name != "add" or not isinstance(arguments.get("n"), int):
                outcome.rejected.append({"text": proposal.source, "reason": "only add(n=int) exists"})
                outcome.observations.append(json.dumps({"error": "only add(n=int) exists"}))
                outcome.failing_functions.append(proposal.name or "?")
                outcome.error = True
                continue
            self.counter += arguments["n"]
            call = f"add(n={arguments['n']!r})"
            outcome.calls.append(ExecutedCall("add", dict(arguments), call))
            outcome.observations.append(str(self.counter))
            step_calls.append(call)
        if step_calls:
            self.decoded[-1].append(step_calls)
        return outcome

    def reference_turns(self) -> list[list[Proposal]]:
        return [[Proposal(source="add(n=1)", name="add", arguments={"n": 1})] for _ in range(self.turns)]

    def score(self) -> Verdict:
        return Verdict(success=self.counter == self.turns, details={"valid": self.counter == self.turns},
                       decoded_calls=self.decoded)


@final
class CounterBenchmark(Benchmark):
    name = "counter"

    def __init__(self, n_tasks: int = 6):
        self.ids = [f"count_{i % 3 + 1}_{i}" for i in range(n_tasks)]

    def task_ids(self) -> list[str]:
        return list(self.ids)

    def task_group(self, task_id: str) -> str:
        return task_id.rsplit("_", 1)[0]

    def data_version(self) -> dict[str, Any]:
        return {"package": "fixture", "sha256": "0" * 64}

    def start(self, task_id: str) -> CounterEpisode:
        return CounterEpisode(task_id, turns=int(task_id.split("_")[1]))
