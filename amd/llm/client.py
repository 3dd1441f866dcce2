"""ChatModel: one `chat` call through the openai SDK, with a persistent response cache, counted retries and a
token ledger. Server faults never raise out of `chat`; they end in `ChatReply(error=...)`."""

import email.utils
import json
import logging
import random
import threading
import time
from dataclasses import asdict, dataclass

import openai

from amd.errors import AmdError
from amd.llm.base import ChatReply, TokenLedger
from amd.llm.cache import ResponseCache, request_key
from amd.llm.transport import LoopbackTransport, is_loopback_http
from amd.paths import cache_dir

log = logging.getLogger("amd.llm")

# What the model sees: part of the cache key. A value of None means "do not send it".
SAMPLING_DEFAULTS = {"temperature": 0, "max_tokens": 512, "seed": 0, "top_p": None}
# How we talk to the server: never part of the cache key.
TRANSPORT_DEFAULTS = {"max_retries": 6, "backoff_s": 1.0, "max_wait_s": 60.0, "timeout_s": 600.0, "cache": True}
# Settings of the embedded server (local: specs only).
LOCAL_SERVER_PARAMS = {"n_ctx", "threads"}
RETRYABLE_STATUS = {408, 409, 429}
# The SDK's telemetry headers, dropped: validating and sending them is a tenth of a step's cost against a fast local
# server, and since amd retries by itself the SDK's retry count would always read 0.
_OMIT = openai.Omit()
TELEMETRY_HEADERS = {name: _OMIT for name in ("X-Stainless-Lang", "X-Stainless-Package-Version", "X-Stainless-OS",
                                              "X-Stainless-Arch", "X-Stainless-Runtime",
                                              "X-Stainless-Runtime-Version", "X-Stainless-Async")}
PER_REQUEST_HEADERS = {"X-Stainless-Retry-Count": _OMIT, "X-Stainless-Read-Timeout": _OMIT}


def sdk_client(**settings) -> openai.OpenAI:
    """An openai SDK client for ChatModel: no SDK retries (ChatModel counts its own), no telemetry headers, and for
    a server on this machine the lean loopback transport (amd.llm.transport)."""
    if is_loopback_http(settings.get("base_url")):
        settings["http_client"] = openai.DefaultHttpxClient(transport=LoopbackTransport())
    return openai.OpenAI(max_retries=0, default_headers=TELEMETRY_HEADERS, **settings)


def resolve_params(params: dict | None) -> dict:
    params = dict(params or {})
    unknown = set(params) - set(SAMPLING_DEFAULTS) - set(TRANSPORT_DEFAULTS) - LOCAL_SERVER_PARAMS
    if unknown:
        known = sorted({*SAMPLING_DEFAULTS, *TRANSPORT_DEFAULTS, *LOCAL_SERVER_PARAMS})
        raise AmdError(f"unknown model parameter(s) {sorted(unknown)}; known: {', '.join(known)}")
    return {**SAMPLING_DEFAULTS, **TRANSPORT_DEFAULTS, **params}


@dataclass
class _Failure:
    reason: str
    retryable: bool
    retry_after: float | None = None


class ChatModel:
    """A model behind an OpenAI-compatible endpoint. Use as a context manager; `chat` is thread-safe."""

    def __init__(self, *, spec: str, model: str, identity: str, client: openai.OpenAI, params: dict,
                 native_tools: bool, extra_body: dict | None = None, token_field: str = "max_tokens",
                 on_close=None):
        self.spec = spec
        self.model = model
        self.identity = identity  # names the weights in the cache key; no host, port or key
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
    def base_url(self) -> str:
        return str(self._client.base_url).rstrip("/")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def ensure_reachable(self) -> None:
        """Fail fast, in one line, when the server cannot be reached at all, after the usual retries. Any HTTP
        answer counts as reachable (some servers have no /models route)."""
        tries = int(self.params["max_retries"]) + 1
        for attempt in range(tries):
            try:
                self._client.get("/models", cast_to=object, options={"timeout": self.params["timeout_s"]})
                return
            except openai.APIStatusError:
                return
            except openai.APIConnectionError as error:  # timeouts included
                reason = error.__cause__ or error
                if attempt + 1 < tries:
                    time.sleep(self._wait_s(attempt, None))
        raise AmdError(f"cannot reach {self.base_url} after {tries} tries: {_short(str(reason))}")

    def close(self) -> None:
        self._client.close()
        if self._on_close:
            self._on_close()
            self._on_close = None

    def chat(self, messages: list[dict], tools: list[dict] | None = None) -> ChatReply:
        sent_tools = tools if tools and self.native_tools else None
        sampling = {k: self.params[k] for k in SAMPLING_DEFAULTS if self.params[k] is not None}
        key_inputs = {"model": self.identity, "messages": messages, "tools": sent_tools, "sampling": sampling,
                      "extra_body": self._extra_body}
        key = request_key(key_inputs) if self._cache else None
        reply = self._cached(key)
        if reply is None:
            reply = self._request(self._request_body(messages, sent_tools, sampling))
            if self._cache and reply.error is None:
                self._cache.put(key, key_inputs, _storable(reply))
        with self._ledger_lock:
            self.ledger.add(reply)
        return reply

    def _cached(self, key: str) -> ChatReply | None:
        stored = self._cache.get(key) if self._cache else None
        return ChatReply(**stored, cached=True, requests=0) if stored is not None else None

    def _request_body(self, messages, tools, sampling) -> bytes:
        """The request's JSON, written as the SDK would write it, with the tool docs (most of a BFCL request)
        encoded once per tool list rather than once per step."""
        body = {"model": self.model, "messages": messages, **(self._extra_body or {})}
        for name, value in sampling.items():
            body[self._token_field if name == "max_tokens" else name] = value
        encoded = _json_bytes(body)
        if not tools:
            return encoded
        sent, tools_json = self._encoded_tools
        if sent is not tools:
            tools_json = _json_bytes(tools)
            self._encoded_tools = (tools, tools_json)
        return encoded[:-1] + b',"tools":' + tools_json + b"}"

    def _request(self, body: bytes) -> ChatReply:
        """Send with counted retries: 429/5xx/timeouts/dropped connections/malformed bodies are retried."""
        max_retries = int(self.params["max_retries"])
        for attempt in range(max_retries + 1):
            outcome = self._attempt(body)
            if isinstance(outcome, ChatReply):
                outcome.requests = attempt + 1
                return outcome
            if not outcome.retryable or attempt == max_retries:
                break
            wait = self._wait_s(attempt, outcome.retry_after)
            log.warning("%s: %s; retry %d/%d in %.1f s", self.spec, outcome.reason, attempt + 1, max_retries, wait)
            time.sleep(wait)
        return ChatReply(text="", requests=attempt + 1, error=outcome.reason)

    def _attempt(self, body: bytes) -> ChatReply | _Failure:
        timeout = self.params["timeout_s"]
        try:
            # The SDK's own POST, minus `chat.completions.create`'s recursive typed-dict transform of messages and
            # tools, which alone cost ~30 ms per BFCL-sized request (bench/bench_pipeline_step.py).
            completion = self._client.post("/chat/completions", cast_to=object, content=body,
                                           options={"timeout": timeout, "headers": PER_REQUEST_HEADERS})
            return _to_reply(completion)
        except openai.APITimeoutError:
            return _Failure(f"no reply from {self.base_url} within {timeout} s", True)
        except openai.APIConnectionError as e:
            return _Failure(f"cannot reach {self.base_url}: {e.__cause__ or e}", True)
        except openai.APIStatusError as e:
            status = e.status_code
            retryable = status in RETRYABLE_STATUS or status >= 500
            return _Failure(f"HTTP {status} from {self.base_url}: {_short(e.message)}", retryable,
                            _retry_after_s(e.response.headers))
        except (openai.OpenAIError, ValueError, TypeError, AttributeError, LookupError) as e:  # an unparsable body
            return _Failure(f"malformed response from {self.base_url}: {type(e).__name__}: {_short(str(e))}", True)

    def _wait_s(self, attempt: int, retry_after: float | None) -> float:
        cap = float(self.params["max_wait_s"])
        if retry_after is not None:
            return min(retry_after, cap)
        return min(cap, float(self.params["backoff_s"]) * 2**attempt) * random.uniform(0.5, 1.5)


def _to_reply(completion) -> ChatReply | _Failure:
    """Read the completion's JSON by hand: no pydantic model per step, and every odd shape is a retryable failure."""
    choices = completion.get("choices") if isinstance(completion, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return _Failure("malformed response: no choices", True)
    message = choices[0].get("message")
    if not isinstance(message, dict):
        return _Failure("malformed response: choice without a message", True)
    content = message.get("content")
    functions = [call.get("function") for call in message.get("tool_calls") or [] if isinstance(call, dict)]
    tool_calls = [{"name": str(function.get("name") or ""), "arguments": function.get("arguments") or ""}
                  for function in functions if isinstance(function, dict)]
    usage = completion.get("usage") if isinstance(completion.get("usage"), dict) else {}
    details = usage.get("prompt_tokens_details") if isinstance(usage.get("prompt_tokens_details"), dict) else {}
    return ChatReply(text=content if isinstance(content, str) else "", tool_calls=tool_calls,
                     prompt_tokens=int(usage.get("prompt_tokens") or 0),
                     completion_tokens=int(usage.get("completion_tokens") or 0),
                     cached_prompt_tokens=int(details.get("cached_tokens") or 0))


def _json_bytes(value) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def _storable(reply: ChatReply) -> dict:
    stored = asdict(reply)
    for transient in ("cached", "requests", "error"):
        stored.pop(transient)
    return stored


def _retry_after_s(headers) -> float | None:
    """Seconds the server asked us to wait: retry-after-ms, or retry-after as seconds or an HTTP date."""
    try:
        if ms := headers.get("retry-after-ms"):
            return max(0.0, float(ms) / 1000)
        value = headers.get("retry-after")
        if not value:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + "..."
