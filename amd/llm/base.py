"""What the rest of amd sees of a model: one `chat` call returning a `ChatReply`. Only the openai SDK talks to
servers (OpenAI, vLLM, the embedded llama.cpp server)."""

from dataclasses import dataclass, field
from typing import Any, Protocol

from amd.core.errors import AmdError


class ModelUnreachable(AmdError):
    """The model's server could not be used at all (refused or dropped connections, timeouts, 5xx, 429, auth)
    after the retries: an infrastructure fault, never a verdict. `chat` raises it; a run stops on it, writing
    nothing for the task, so a rerun against a live server finishes exactly the tasks that lack a verdict."""


@dataclass
class ChatReply:
    """A model's reply to one chat request, with the tokens it took (its error instead, where it failed)."""

    text: str  # the message content ("" when the model only made native tool calls)
    tool_calls: list[dict] = field(default_factory=list)  # native calls: {"name": str, "arguments": str (raw JSON)}
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0  # prompt tokens the server took from its prefix cache (not prefilled again)
    cached: bool = False  # served from the on-disk response cache, no request made
    requests: int = 0  # HTTP requests sent for this reply, retries included
    error: str | None = None  # set when no usable reply could be had after retries
    finish_reason: str | None = None  # the server's: "stop", "tool_calls", "length" (cut by the token limit), ...

    def usage(self) -> dict:
        """What the reply counts for in a trajectory's memory_calls and user_calls: a usable reply, the HTTP
        requests sent for it and its tokens."""
        return {"replies": int(self.error is None), "requests": self.requests, "prompt": self.prompt_tokens,
                "completion": self.completion_tokens, "cached_prompt": self.cached_prompt_tokens}


class Chat(Protocol):
    """A model's chat as a memory method or the agent calls it (amd.llm.client.ChatModel.chat): one reply to
    `messages`; `sampling` overrides temperature, seed, ... for this request only."""

    def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                 sampling: dict[str, Any] | None = None,
                 response_format: dict[str, Any] | None = None) -> "ChatReply": ...


@dataclass
class TokenLedger:
    """Per-run totals, printed at the end of a run and kept next to its output."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    requests: int = 0
    replies: int = 0  # usable replies, cached ones included: the requests a run with an empty cache would send
    cache_hits: int = 0
    failures: int = 0
    cut_replies: int = 0  # replies the server cut at the token limit (finish_reason "length")

    def add(self, reply: ChatReply) -> None:
        self.prompt_tokens += reply.prompt_tokens
        self.completion_tokens += reply.completion_tokens
        self.cached_prompt_tokens += reply.cached_prompt_tokens
        self.requests += reply.requests
        self.replies += int(reply.error is None)
        self.cache_hits += int(reply.cached)
        self.failures += int(reply.error is not None)
        self.cut_replies += int(reply.finish_reason == "length")
