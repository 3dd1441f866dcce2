"""ChatModel: one `chat` call through the openai SDK, with a persistent response cache and a token ledger.

Retries are the SDK's own (`max_retries`: 408/409/429/5xx, timeouts, dropped connections, Retry-After honoured).
ChatModel adds only what the SDK does not do: it sends a request again when an HTTP 200 carries no usable completion
(garbage, no choices, the wrong shape), within the same budget of retries, and it counts the HTTP requests each
`chat` really sent, SDK retries included, with a request hook on the SDK's HTTP client. A server that cannot be
used once the retries are spent (no connection, no reply in time, 5xx, 429, 401/403/404) raises ModelUnreachable
out of `chat`: an infrastructure fault is never a verdict. A refusal of the request itself (400, 413, 422) or a
reply that stays malformed ends in `ChatReply(error=...)`: the model's answer to that request."""

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import openai

from amd.core.errors import AmdError
from amd.core.paths import cache_dir
from amd.core.vocabulary import MEMORY_FRAMINGS, PROMPTING
from amd.llm.base import ChatReply, ModelUnreachable, TokenLedger
from amd.llm.cache import ResponseCache, request_key

log = logging.getLogger("amd.llm")

# What the model sees: part of the request body, hence of the cache key. A value of None means "do not send it".
SAMPLING_DEFAULTS = {"temperature": 0, "max_tokens": 512, "seed": 0, "top_p": None}
# How we talk to the server: never part of the cache key.
TRANSPORT_DEFAULTS = {"max_retries": 6, "timeout_s": 600.0, "cache": True}
# Settings of the embedded server (local: specs only).
LOCAL_SERVER_PARAMS = {"n_ctx", "threads"}
# HTTP statuses that refuse the request itself (too long a prompt, a bad body): the model's answer to that request,
# recorded as the step's model_error. Any other status left after the retries means the server cannot be used.
REQUEST_REFUSED = {400, 413, 422}
# How the model is asked, beyond sampling: Qwen3's thinking (chat template switch; off unless asked), and whose
# prompt the agent uses (amd.agent.agents.ModelAgent: "amd", or "official": the benchmark's messages alone, as an
# official function-calling harness sends them), and how it shows retrieved memory (labelled or bare).
MODEL_OPTIONS = {"think": False, "prompting": "amd", "memory_framing": MEMORY_FRAMINGS[0]}
# The SDK's telemetry headers, dropped: validating and sending them is 0.06-0.17 ms of a 1-2 ms request, and a step
# is CPU-bound when many tasks share one server (bench/bench_step_overhead.py, bench/RESULTS.md).
_OMIT = openai.Omit()
TELEMETRY_HEADERS = {name: _OMIT for name in ("X-Stainless-Lang", "X-Stainless-Package-Version", "X-Stainless-OS",
                                              "X-Stainless-Arch", "X-Stainless-Runtime",
                                              "X-Stainless-Runtime-Version", "X-Stainless-Async")}
PER_REQUEST_HEADERS = {"X-Stainless-Retry-Count": _OMIT, "X-Stainless-Read-Timeout": _OMIT}

_sent = threading.local()  # HTTP requests this thread has sent through clients made by sdk_client


def _count_request(_request) -> None:
    _sent.count = requests_sent() + 1


def requests_sent() -> int:
    """HTTP requests the calling thread has sent so far through clients made by `sdk_client`."""
    return getattr(_sent, "count", 0)


def sdk_client(params: dict, **settings) -> openai.OpenAI:
    """An openai SDK client for ChatModel: the run's retries and timeout, no telemetry headers, and a request hook
    that counts every HTTP request it sends (retries and redirects included) for the calling thread."""
    http_client = openai.DefaultHttpxClient(event_hooks={"request": [_count_request]})
    return openai.OpenAI(max_retries=int(params["max_retries"]), timeout=float(params["timeout_s"]),
                         default_headers=TELEMETRY_HEADERS, http_client=http_client, **settings)


def resolve_params(params: dict | None) -> dict:
    params = dict(params or {})
    unknown = set(params) - set(SAMPLING_DEFAULTS) - set(TRANSPORT_DEFAULTS) - LOCAL_SERVER_PARAMS - set(MODEL_OPTIONS)
    if unknown:
        known = sorted({*SAMPLING_DEFAULTS, *TRANSPORT_DEFAULTS, *LOCAL_SERVER_PARAMS, *MODEL_OPTIONS})
        raise AmdError(f"unknown model parameter(s) {sorted(unknown)}; known: {', '.join(known)}")
    resolved = {**SAMPLING_DEFAULTS, **TRANSPORT_DEFAULTS, **MODEL_OPTIONS, **params}
    for option, choices in (("prompting", PROMPTING), ("memory_framing", MEMORY_FRAMINGS)):
        if resolved[option] not in choices:
            raise AmdError(f"unknown {option} {resolved[option]!r}; known: {', '.join(choices)}")
    return resolved


class MalformedReply(ValueError):
    """An HTTP 200 whose body is not a usable chat completion."""


class ChatModel:
    """A model behind an OpenAI-compatible endpoint. Use as a context manager; `chat` is thread-safe.
    `client` comes from `sdk_client`, whose request hook lets each reply say how many requests it took."""

    def __init__(self, *, spec: str, model: str, identity: str | Callable[[openai.OpenAI], str], client: openai.OpenAI,
                 params: dict,
                 native_tools: bool, extra_body: dict | None = None, token_field: str = "max_tokens",
                 on_close=None):
        self.spec = spec
        self.model = model
        # What the cache key names as the model (no key, and no host or port where the weights are known): given,
        # or asked of the server on first use (a vllm: model: what it serves, amd.llm.served_identity).
        self._identity = identity
        self._identity_lock = threading.Lock()
        self.params = params
        self.native_tools = native_tools  # False: tools are not sent, the prompt carries their docs
        self.ledger = TokenLedger()
        self._client = client
        self._extra_body = extra_body
        self._token_field = token_field
        self._on_close = on_close
        self._ledger_lock = threading.Lock()
        self._cache = ResponseCache(cache_dir("responses")) if params["cache"] else None
        self._encoded_tools = (None, b"")  # the last tool list sent and its JSON: an agent resends one list, unchanged

    @property
    def identity(self) -> str:
        """The cache key's name of the model; asked of the server once where not given (a server that cannot be
        reached raises ModelUnreachable, as `chat` does)."""
        if callable(self._identity):
            with self._identity_lock:
                if callable(self._identity):
                    first = requests_sent()
                    try:
                        self._identity = self._identity(self._client)
                    except openai.APIConnectionError as error:  # timeouts included, after the SDK's retries
                        raise ModelUnreachable(f"model {self.model}: {self._describe(error)} "
                                               f"({requests_sent() - first} requests)") from None
        return self._identity

    @property
    def base_url(self) -> str:
        return str(self._client.base_url).rstrip("/")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def ensure_reachable(self) -> None:
        """Fail fast, in one line, when the server cannot be reached at all, after the SDK's retries. Any HTTP
        answer counts as reachable (some servers have no /models route)."""
        first = requests_sent()
        try:
            self._client.get("/models", cast_to=object)
        except openai.APIStatusError:
            return
        except openai.APIConnectionError as error:  # timeouts included
            raise AmdError(f"cannot reach {self.base_url} after {requests_sent() - first} tries: "
                           f"{_short(str(error.__cause__ or error))}") from None

    def close(self) -> None:
        self._client.close()
        if self._on_close:
            self._on_close()
            self._on_close = None

    def chat(self, messages: list[dict], tools: list[dict] | None = None, sampling: dict | None = None,
             response_format: dict | None = None) -> ChatReply:
        """One reply. `sampling` overrides the model's sampling parameters for this request only (keys of
        SAMPLING_DEFAULTS; e.g. one of several samples a memory method draws: {"temperature": 0.7, "seed": 1001});
        `response_format` constrains the reply (amd.agent.json_steps). Both are part of the request body, hence of
        the cache key."""
        unknown = set(sampling or {}) - set(SAMPLING_DEFAULTS)
        if unknown:
            raise AmdError(f"unknown sampling parameter(s) {sorted(unknown)}; known: {', '.join(SAMPLING_DEFAULTS)}")
        body = self._request_body(messages, tools if tools and self.native_tools else None, sampling or {},
                                  response_format)
        key = request_key(self.identity, body) if self._cache else None
        reply = self._cached(key)
        if reply is None:
            reply = self._request(body)
            if self._cache and key is not None and reply.error is None:
                self._cache.put(key, _storable(reply))
        with self._ledger_lock:
            self.ledger.add(reply)
        return reply

    def _cached(self, key: str | None) -> ChatReply | None:
        if not self._cache or key is None:
            return None
        stored = self._cache.get(key)
        if stored is None:
            return None
        why = _unstorable(stored)
        if why:
            self._cache.discard(key, why)
            return None
        return ChatReply(**stored, cached=True, requests=0)

    def _request_body(self, messages, tools, sampling: dict, response_format: dict | None = None) -> bytes:
        """The request's JSON, written as the SDK would write it, with the tool docs (most of a BFCL request)
        encoded once per tool list rather than once per step."""
        body = {"model": self.model, "messages": messages, **(self._extra_body or {})}
        if response_format is not None:
            body["response_format"] = response_format
        chosen = self.params | sampling if sampling else self.params
        for name in SAMPLING_DEFAULTS:
            if chosen[name] is not None:
                body[self._token_field if name == "max_tokens" else name] = chosen[name]
        encoded = _json_bytes(body)
        if not tools:
            return encoded
        sent, tools_json = self._encoded_tools
        if sent is not tools:
            tools_json = _json_bytes(tools)
            self._encoded_tools = (tools, tools_json)
        return encoded[:-1] + b',"tools":' + tools_json + b"}"

    def _request(self, body: bytes) -> ChatReply:
        """POST through the SDK, which retries HTTP faults itself; a 200 without a usable completion is sent again.
        Both share one budget: at most max_retries + 1 requests per reply."""
        budget, first, reason = int(self.params["max_retries"]) + 1, requests_sent(), "no request sent"
        for _ in range(budget):
            retries_left = budget - 1 - (requests_sent() - first)
            if retries_left < 0:
                break
            try:
                reply = self._post(body, retries_left)
            except (openai.APIStatusError, openai.APIConnectionError) as error:  # the SDK's retries are spent
                sent = requests_sent() - first
                if isinstance(error, openai.APIStatusError) and error.status_code in REQUEST_REFUSED:
                    return ChatReply(text="", requests=sent, error=self._describe(error))
                raise ModelUnreachable(f"model {self.model}: {self._describe(error)} ({sent} requests)") from None
            except (openai.OpenAIError, ValueError) as error:  # a body the SDK or _to_reply could not read
                reason = f"malformed response from {self.base_url}: {type(error).__name__}: {_short(str(error))}"
                log.warning("%s: %s", self.spec, reason)
                continue
            reply.requests = requests_sent() - first
            if reply.requests > 1:  # the SDK logs its retries below the level amd shows
                log.warning("%s: one reply took %d requests (retried)", self.spec, reply.requests)
            return reply
        return ChatReply(text="", requests=requests_sent() - first, error=reason)

    def _post(self, body: bytes, retries_left: int) -> ChatReply:
        """The SDK's own POST, minus `chat.completions.create`'s recursive typed transform of messages and tools
        and its pydantic reply (bench/bench_step_overhead.py measures what they would cost)."""
        completion = self._client.post("/chat/completions", cast_to=object, content=body,
                                       options={"max_retries": retries_left, "headers": PER_REQUEST_HEADERS})
        return _to_reply(completion)

    def _describe(self, error: openai.APIError) -> str:
        if isinstance(error, openai.APITimeoutError):
            return f"no reply from {self.base_url} within {self.params['timeout_s']} s"
        if isinstance(error, openai.APIConnectionError):
            return f"cannot reach {self.base_url}: {error.__cause__ or error}"
        return f"HTTP {error.status_code} from {self.base_url}: {_short(error.message)}"


def _to_reply(completion) -> ChatReply:
    """Read the completion's JSON by hand: no pydantic model per step; an odd shape raises MalformedReply."""
    choices = completion.get("choices") if isinstance(completion, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise MalformedReply("no choices")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise MalformedReply("choice without a message")
    content = message.get("content")
    functions = [call.get("function") for call in message.get("tool_calls") or [] if isinstance(call, dict)]
    tool_calls = [{"name": str(function.get("name") or ""), "arguments": function.get("arguments") or ""}
                  for function in functions if isinstance(function, dict)]
    usage: dict[str, Any] = completion.get("usage") if isinstance(completion.get("usage"), dict) else {}
    finish_reason = choices[0].get("finish_reason")
    details = usage.get("prompt_tokens_details")
    details = details if isinstance(details, dict) else {}
    return ChatReply(text=content if isinstance(content, str) else "", tool_calls=tool_calls,
                     prompt_tokens=int(usage.get("prompt_tokens") or 0),
                     completion_tokens=int(usage.get("completion_tokens") or 0),
                     cached_prompt_tokens=int(details.get("cached_tokens") or 0),
                     finish_reason=finish_reason if isinstance(finish_reason, str) else None)


def _json_bytes(value) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def _storable(reply: ChatReply) -> dict:
    stored = asdict(reply)
    for transient in ("cached", "requests", "error"):
        stored.pop(transient)
    return stored


STORED_TYPES: dict[str, Any] = {"text": str, "tool_calls": list, "prompt_tokens": int, "completion_tokens": int,
                "cached_prompt_tokens": int, "finish_reason": (str, type(None))}


def _unstorable(stored: dict) -> str | None:
    """Why a cached reply is not one `_storable` writes (older files may lack the fields added since), or None."""
    extra = set(stored) - set(STORED_TYPES)
    if extra or "text" not in stored:
        return f"fields {sorted(stored)}, expected {sorted(STORED_TYPES)}"
    wrong = [name for name, value in stored.items() if not isinstance(value, STORED_TYPES[name])
             or isinstance(value, bool) or name == "tool_calls" and not all(
                 isinstance(call, dict) and isinstance(call.get("name"), str) and isinstance(call.get("arguments"), str)
                 for call in value)]
    return f"field {wrong[0]} of the wrong type" if wrong else None


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + "..."
