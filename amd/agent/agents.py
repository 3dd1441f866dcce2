"""Agents: a model agent (any OpenAI-compatible model) and the oracle teacher (ground truth, no model).

An agent keeps its own conversation and answers one step at a time. The loop in `amd.agent.loop` drives it:
begin → add_user → act → observe → act → ... The same interface serves teachers and students.
"""

import json
from dataclasses import dataclass, field

from amd.agent.parsing import parse_reply
from amd.benchmarks.base import Proposal, StepOutcome
from amd.prompts import load_prompt


@dataclass
class AgentReply:
    text: str
    proposals: list[Proposal] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: bool = False
    requests: int = 0
    error: str | None = None
    finish_reason: str | None = None  # the server's; "length": cut by the token limit; None without a model


class ModelAgent:
    """Talks to a model through `amd.llm` (OpenAI SDK). Native tool calls where the server fills them (vLLM with a
    tool parser, OpenAI); otherwise the tool docs go in the system prompt and calls are parsed from the text."""

    kind = "model"

    def __init__(self, model):
        self.model = model
        self.messages: list[dict] = []
        self.tools: list[dict] = []
        self._step = 0
        self._last_native = False

    def begin(self, tools: list[dict], memory_text: str) -> None:
        self.tools = tools
        if self.model.native_tools:
            system = load_prompt("agent_system_native")
        else:
            docs = json.dumps([tool["function"] for tool in tools], ensure_ascii=False)
            system = load_prompt("agent_system").format(tool_docs=docs)
        # Memory goes after the stable tool docs so the server's prefix cache stays warm across memory configs.
        if memory_text:
            system = f"{system}\n\n{memory_text}"
        self.messages = [{"role": "system", "content": system}]

    def add_user(self, text: str, memory_text: str = "") -> None:
        content = f"{text}\n\n{memory_text}" if memory_text else text
        self.messages.append({"role": "user", "content": content})

    def act(self) -> AgentReply:
        reply = self.model.chat(self.messages, self.tools if self.model.native_tools else None)
        result = AgentReply(text=reply.text, prompt_tokens=reply.prompt_tokens,
                            completion_tokens=reply.completion_tokens, cached=reply.cached,
                            requests=reply.requests, error=reply.error, finish_reason=reply.finish_reason)
        if reply.error is None:
            result.proposals = parse_reply(reply.text, reply.tool_calls)
            self._remember_reply(reply.text, result.proposals, native=bool(reply.tool_calls))
        return result

    def observe(self, proposals: list[Proposal], outcome: StepOutcome, hint: str = "") -> None:
        observations = list(outcome.observations)
        if hint and observations:
            observations[-1] = f"{observations[-1]}\n\n{hint}"
        if self._last_native:
            for index, observation in enumerate(observations):
                self.messages.append({"role": "tool", "tool_call_id": self._call_id(index), "content": observation})
        else:
            lines = [f"{p.source} -> {obs}" for p, obs in zip(proposals, observations)]
            results = "\n".join(lines)
            self.messages.append({"role": "user", "content": load_prompt("observation").format(results=results)})

    def decompose_chat(self):
        """The chat function memory uses to have the student decompose an instruction into subtask labels."""
        return self.model.chat

    def _remember_reply(self, text: str, proposals: list[Proposal], native: bool) -> None:
        self._step += 1
        self._last_native = native
        message = {"role": "assistant", "content": text}
        if native:
            message["tool_calls"] = [
                {"id": self._call_id(i), "type": "function",
                 "function": {"name": p.name or "", "arguments": json.dumps(p.arguments or {})}}
                for i, p in enumerate(proposals)
            ]
        self.messages.append(message)

    def _call_id(self, index: int) -> str:
        return f"call_{self._step}_{index}"


class OracleAgent:
    """The upper-bound teacher: replays the benchmark's ground-truth calls in the real environment, one call per
    step, then ends each turn with a no-call reply. It needs no model; its trajectories are labelled kind=oracle."""

    kind = "oracle"

    def __init__(self, reference_turns: list[list[Proposal]]):
        self.reference_turns = reference_turns
        self.turn = -1
        self.pending: list[Proposal] = []

    def begin(self, tools: list[dict], memory_text: str) -> None:
        self.turn = -1

    def add_user(self, text: str, memory_text: str = "") -> None:
        self.turn += 1
        turns = self.reference_turns
        self.pending = list(turns[self.turn]) if self.turn < len(turns) else []

    def act(self) -> AgentReply:
        if not self.pending:
            return AgentReply(text="Done.")
        proposal = self.pending.pop(0)
        return AgentReply(text=proposal.source, proposals=[proposal])

    def observe(self, proposals: list[Proposal], outcome: StepOutcome, hint: str = "") -> None:
        pass

    def decompose_chat(self):
        return None
