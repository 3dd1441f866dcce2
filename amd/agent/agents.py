"""Agents: a model agent (any OpenAI-compatible model) and the oracle teacher (ground truth, no model).

An agent keeps its own conversation and answers one step at a time (`amd.agent.base.Agent`). The loop in
`amd.agent.loop` drives it: begin → add_user → act → observe → act → ... The same interface serves teachers and
students. Agents are registered in amd/plugins.toml ([agents]).
"""

import json
from typing import Any

from amd.agent.base import AgentReply
from amd.agent.history import trimmed
from amd.agent.hooks import as_retrieved_memory
from amd.agent.json_steps import read_step, step_format
from amd.benchmarks.base import CODE, Episode, Proposal, StepOutcome
from amd.benchmarks.parsing import parse_code_reply, parse_first_code_block, parse_reply
from amd.core.errors import AmdError
from amd.core.prompts import load_prompt

OFFICIAL = "official"
JSON_STEPS = "json"


class ModelAgent:
    """Talks to a model through `amd.llm` (OpenAI SDK), in the episode's action format. Tool calls: native ones
    where the server fills them (vLLM with a tool parser, OpenAI), otherwise the tool docs go in the system prompt
    and calls are parsed from the text. Prompting `json`: the tool docs go in the system prompt and every reply is
    one JSON object, a call or the answer, its decoding constrained to the tools' schemas (amd.agent.json_steps).
    Code: the model writes a Python block per step (prompts/agent_system_code.md with the episode's guide); the
    environment runs it and the output comes back as the next user message."""

    needs_model = True

    @classmethod
    def create(cls, episode: Episode, model) -> "ModelAgent":
        code_guide = episode.guide if episode.action_format == CODE else None
        return cls(model, episode.system_message, code_guide, episode.official_tools, episode.official_history,
                   first_code_block=episode.first_code_block, history_chars=episode.history_chars)

    def __init__(self, model, benchmark_system: str = "", code_guide: str | None = None,
                 official_tools: list[dict] | None = None, official_history: dict | None = None,
                 first_code_block: bool = False, history_chars: int | None = None):
        self.model = model
        self.benchmark_system = benchmark_system  # the benchmark's own instructions, after ours
        self.code_guide = code_guide  # None: tool calls
        # prompting official: the tools as the official harness sends them, and how it writes the history it sends
        # back (`null_content`: an assistant message with tool calls has content null, as the server sent it, not
        # ""; `tool_names`: each tool message names its function)
        self.official_tools = official_tools
        self.official_history = official_history or {}
        self.first_code_block = first_code_block  # code: run only a reply's first block (the ACE harness)
        self.history_chars = history_chars  # code: trim what is sent to this many characters (amd.agent.history)
        self.messages: list[dict] = []
        self.tools: list[dict] = []
        self._step = 0
        self._last_native = False
        self._response_format: dict[str, Any] | None = None  # prompting json: the constraint of every step
        self._system = ""  # the system prompt without memory
        self._memory: dict[str, Any] = {"start": "", "turn": "", "first": False}

    def _framed(self, memory_text: str) -> str:
        """Memory as this agent shows it: labelled as retrieved data (amd.agent.hooks.as_retrieved_memory), or bare
        as the paper's releases inject it (memory_framing bare)."""
        return memory_text if self.model.params["memory_framing"] == "bare" else as_retrieved_memory(memory_text)

    def begin(self, tools: list[dict], memory_text: str, memory_first: bool = False) -> None:
        self.tools = tools
        self._memory = {"start": self._framed(memory_text), "turn": "", "first": memory_first}
        prompting = self.model.params["prompting"]
        if prompting == OFFICIAL:
            self._begin_official()
            return
        if self.code_guide is not None:
            self.tools = []  # code actions: the model gets no tools, it writes code
            system = load_prompt("agent_system_code").format(guide=self.code_guide)
        elif prompting == JSON_STEPS:
            self._response_format = step_format(tools)
            system = load_prompt("agent_system_json").format(tool_docs=self._tool_docs(tools))
        elif self.model.native_tools:
            system = load_prompt("agent_system_native")
        else:
            system = load_prompt("agent_system").format(tool_docs=self._tool_docs(tools))
        if self.benchmark_system:
            system = f"{system}\n\n{self.benchmark_system}"
        self._system = system
        self.messages = []
        self._place_system()

    def _begin_official(self) -> None:
        """The official function-calling harnesses' messages: the tools go as native tools, exactly as the official
        harness converts them where the benchmark says (`official_tools`), and no system prompt of ours; only the
        benchmark's own system message and the memory, where there are any, as a system message."""
        if not self.model.native_tools or self.code_guide is not None:
            raise AmdError(f"prompting 'official' needs native tool calls; {self.model.spec} reads calls from text "
                           "or the benchmark acts in code")
        self.tools = self.official_tools or self.tools
        self._system = self.benchmark_system
        self.messages = []
        self._place_system()

    def _place_system(self) -> None:
        """The system message: the prompt and the memory (task start and this turn's), memory after the prompt (the
        stable prefix first, so the server's prefix cache stays warm across memory configs) or before it, as the
        paper and its release place it. None when both are empty."""
        memory = "\n\n".join(part for part in (self._memory["start"], self._memory["turn"]) if part)
        parts = (memory, self._system) if self._memory["first"] else (self._system, memory)
        content = "\n\n".join(part for part in parts if part)
        has_system = bool(self.messages) and self.messages[0]["role"] == "system"
        if content:
            self.messages[:1 if has_system else 0] = [{"role": "system", "content": content}]
        elif has_system:
            del self.messages[0]

    def add_user(self, text: str, memory_text: str = "", memory_in_system: bool = False) -> None:
        memory_text = self._framed(memory_text)
        if memory_in_system:
            self._memory["turn"] = memory_text
            self._place_system()
            memory_text = ""
        content = f"{text}\n\n{memory_text}" if memory_text else text
        self.messages.append({"role": "user", "content": content})

    @staticmethod
    def _tool_docs(tools: list[dict]) -> str:
        return json.dumps([tool["function"] for tool in tools], ensure_ascii=False)

    def act(self) -> AgentReply:
        json_steps = self._response_format is not None
        native = self.model.native_tools and not json_steps
        messages = trimmed(self.messages, self.history_chars, head=2) if self.history_chars else self.messages
        reply = self.model.chat(messages, self.tools if native else None, response_format=self._response_format)
        result = AgentReply(text=reply.text, prompt_tokens=reply.prompt_tokens,
                            completion_tokens=reply.completion_tokens,
                            cached_prompt_tokens=reply.cached_prompt_tokens, cached=reply.cached,
                            requests=reply.requests, error=reply.error, finish_reason=reply.finish_reason)
        if reply.error is None:
            kept = reply.text
            if self.code_guide is not None and self.first_code_block:
                result.proposals, kept = parse_first_code_block(reply.text)
            elif self.code_guide is not None:
                result.proposals = parse_code_reply(reply.text)
            elif json_steps:  # an answer object ends the turn with its answer as the reply text
                result.proposals, result.text = read_step(reply.text)
            else:
                result.proposals = parse_reply(reply.text, reply.tool_calls)
            self._remember_reply(kept, result.proposals, reply.tool_calls)
        return result

    def observe(self, proposals: list[Proposal], outcome: StepOutcome, hint: str = "") -> None:
        hint = self._framed(hint)
        observations = list(outcome.observations)
        if hint and observations:
            observations[-1] = f"{observations[-1]}\n\n{hint}"
        if self.code_guide is not None:
            output = "\n\n".join(observations)
            self.messages.append({"role": "user", "content": load_prompt("observation_code").format(output=output)})
        elif self._last_native:
            named = self.model.params["prompting"] == OFFICIAL and self.official_history.get("tool_names")
            for index, observation in enumerate(observations):
                message: dict[str, Any] = {"role": "tool", "tool_call_id": self._call_id(index), "content": observation}
                if named and index < len(proposals):
                    message["name"] = proposals[index].name
                self.messages.append(message)
        else:
            lines = [f"{p.source} -> {obs}" for p, obs in zip(proposals, observations)]
            results = "\n".join(lines)
            self.messages.append({"role": "user", "content": load_prompt("observation").format(results=results)})

    def student_chat(self):
        """The model's chat, for what a memory method asks of the student (a decomposition, keywords)."""
        return self.model.chat

    def _remember_reply(self, text: str, proposals: list[Proposal], tool_calls: list[dict]) -> None:
        self._step += 1
        self._last_native = native = bool(tool_calls)
        # The official harnesses send back the arguments as the model wrote them.
        official = self.model.params["prompting"] == OFFICIAL
        null = official and native and not text and self.official_history.get("null_content")
        message: dict[str, Any] = {"role": "assistant", "content": None if null else text}
        if native:
            message["tool_calls"] = [
                {"id": self._call_id(i), "type": "function",
                 "function": {"name": p.name or "", "arguments": call["arguments"] if official
                              else json.dumps(p.arguments or {})}}
                for i, (p, call) in enumerate(zip(proposals, tool_calls))
            ]
        self.messages.append(message)

    def _call_id(self, index: int) -> str:
        return f"call_{self._step}_{index}"


class OracleAgent:
    """The upper-bound teacher: replays the benchmark's ground-truth calls in the real environment, one call per
    step, then ends each turn with a no-call reply. It needs no model; its trajectories are labelled kind=oracle."""

    needs_model = False
    description = "ground-truth calls executed one per step; an upper-bound teacher, no model"

    @classmethod
    def create(cls, episode: Episode, model=None) -> "OracleAgent":
        turns = episode.reference_turns()
        if turns is None:
            raise AmdError(f"{episode.task_id}: the benchmark has no ground-truth actions for the oracle")
        return cls(turns, episode.reference_replies())

    def __init__(self, reference_turns: list[list[Proposal]], reference_replies: list[str] | None = None):
        self.reference_turns = reference_turns
        self.reference_replies = reference_replies
        self.turn = -1
        self.pending: list[Proposal] = []

    def begin(self, tools: list[dict], memory_text: str, memory_first: bool = False) -> None:
        self.turn = -1

    def add_user(self, text: str, memory_text: str = "", memory_in_system: bool = False) -> None:
        self.turn += 1
        turns = self.reference_turns
        self.pending = list(turns[self.turn]) if self.turn < len(turns) else []

    def act(self) -> AgentReply:
        if not self.pending:
            replies = self.reference_replies
            return AgentReply(text=replies[self.turn] if replies and self.turn < len(replies) else "Done.")
        proposal = self.pending.pop(0)
        return AgentReply(text=proposal.source, proposals=[proposal])

    def observe(self, proposals: list[Proposal], outcome: StepOutcome, hint: str = "") -> None:
        pass

    def student_chat(self):
        return None
