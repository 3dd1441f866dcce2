"""The agent interface the loop drives, and what an agent answers per step."""

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from amd.benchmarks.base import Episode, Proposal, StepOutcome

if TYPE_CHECKING:  # amd.llm's package imports the openai SDK
    from amd.llm.base import Chat
    from amd.llm.client import ChatModel


@dataclass
class AgentReply:
    """One step of an agent: the model's text, the actions read from it, and what the step cost."""

    text: str
    proposals: list[Proposal] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    cached: bool = False
    requests: int = 0
    error: str | None = None
    finish_reason: str | None = None  # the server's; "length": cut by the token limit; None without a model


class Agent(Protocol):
    """What the loop (amd.agent.loop) drives: begin, then per user turn add_user, act, observe, act, ..."""

    needs_model: bool  # False for agents that act without a model (the oracle)

    @classmethod
    def create(cls, episode: Episode, model: "ChatModel | None") -> "Agent":
        """A fresh agent for one episode; `model` is an open amd.llm.ChatModel, or None when not needed."""
        ...

    def begin(self, tools: list[dict[str, Any]], memory_text: str, memory_first: bool = False) -> None:
        """Start the conversation: tool docs, then any memory text (before them with `memory_first`), in the
        system prompt."""
        ...

    def add_user(self, text: str, memory_text: str = "", memory_in_system: bool = False) -> None:
        """A user turn, with memory text after it (or, `memory_in_system`, as the system prompt's turn memory)."""
        ...

    def act(self) -> AgentReply:
        """One step: the model's reply and the actions parsed from it."""
        ...

    def observe(self, proposals: list[Proposal], outcome: StepOutcome, hint: str = "") -> None:
        """The step's observations, with a memory hint appended after an error."""
        ...

    def student_chat(self) -> "Chat | None":
        """The chat a memory method may use to ask the student something, or None."""
        ...
