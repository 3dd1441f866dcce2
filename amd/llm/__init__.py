"""The model layer: `open_model(spec, params)` gives a ChatModel (a context manager) whose `chat` returns a
ChatReply. Specs are described in amd.llm.specs; params in amd.llm.client (sampling vs transport)."""

import os
from typing import Any
from urllib.parse import urlsplit

import openai

from amd.core.errors import AmdError
from amd.llm.base import ChatReply, TokenLedger
from amd.llm.client import ChatModel, resolve_params, sdk_client
from amd.llm.specs import LOCAL_WEIGHTS, ModelSpec, parse_spec

__all__ = ["ChatModel", "ChatReply", "TokenLedger", "open_model", "openai_identity"]

OPENAI_API_HOST = "api.openai.com"
NO_KEY = "EMPTY"  # what the SDK sends where an endpoint takes no key (it insists on one)


def qwen3_thinking(enabled: bool) -> dict:
    """Qwen3's chat-template switch (off in the paper's runs; `--think on` turns it on)."""
    return {"chat_template_kwargs": {"enable_thinking": bool(enabled)}}


def open_model(spec: str, params: dict | None = None) -> ChatModel:
    parsed = parse_spec(spec)
    params = resolve_params(params)
    if params["think"] and parsed.kind != "vllm":
        raise AmdError(f"thinking can be switched on for Qwen3 models served by vLLM only, not {spec}")
    common: dict[str, Any] = {"spec": spec, "model": parsed.model, "params": params}
    if parsed.kind == "openai":
        client = sdk_client(params, api_key=endpoint_key(parsed, spec), base_url=parsed.base_url)
        # max_completion_tokens: newer OpenAI models refuse max_tokens.
        return ChatModel(**common, identity=openai_identity(parsed.name, str(client.base_url)), client=client,
                         native_tools=True, token_field="max_completion_tokens")
    if parsed.kind == "vllm":
        client = sdk_client(params, api_key=endpoint_key(parsed, spec), base_url=parsed.base_url)
        if params["think"] and not parsed.is_qwen3:
            raise AmdError(f"thinking can be switched on for Qwen3 models only, not {spec}")
        return ChatModel(**common, identity=lambda sdk: served_identity(parsed, sdk), client=client, native_tools=True,
                         extra_body=qwen3_thinking(params["think"]) if parsed.is_qwen3 else None)
    return _open_local(parsed.model, common)


def endpoint_key(parsed: ModelSpec, spec: str) -> str:
    """The key an endpoint gets: from the variable the spec names (`#key=VAR`), else OPENAI_API_KEY for OpenAI's API
    (or OPENAI_BASE_URL), VLLM_API_KEY for a vLLM server; an `openai:` endpoint of its own without `#key=` gets none.
    Errors name the variable, never its value."""
    if parsed.key_env:
        if not os.environ.get(parsed.key_env):
            raise AmdError(f"{spec} needs its key in the environment variable {parsed.key_env}, which is not set")
        return os.environ[parsed.key_env]
    if parsed.kind == "vllm":
        return os.environ.get("VLLM_API_KEY") or NO_KEY
    if parsed.base_url:
        return NO_KEY
    if not os.environ.get("OPENAI_API_KEY"):
        raise AmdError(f"{spec} needs OPENAI_API_KEY")
    return os.environ["OPENAI_API_KEY"]


def openai_identity(spec: str, base_url: str) -> str:
    """The cache identity of an openai: model (chat or embeddings): its spec on the OpenAI API; elsewhere
    (OPENAI_BASE_URL) the server is part of it, so two servers that serve one model name never share cached
    replies or vectors. No credentials."""
    url = urlsplit(base_url)
    if url.hostname == OPENAI_API_HOST:
        return spec
    port = f":{url.port}" if url.port else ""
    return f"{spec}@{url.scheme}://{url.hostname}{port}{url.path.rstrip('/')}"


def served_identity(parsed: ModelSpec, client: openai.OpenAI) -> str:
    """The cache identity of a vllm: model: its name and what the server says it serves under that name (vLLM's
    /v1/models: `root`, the checkpoint's path or hub id, and `parent` for an adapter), so two servers with different
    checkpoints under one name never share cached replies, while the same checkpoint served again, on any host or
    port, finds its own. A server that does not say (no /models, no root): its URL too, as for openai:. A server
    that cannot be reached raises the SDK's APIConnectionError (ChatModel.identity makes it ModelUnreachable)."""
    try:
        listing = client.get("/models", cast_to=object)
    except openai.APIStatusError:
        listing = None
    cards = listing.get("data") if isinstance(listing, dict) else None
    card = next((c for c in cards if isinstance(c, dict) and c.get("id") == parsed.model), {}) \
        if isinstance(cards, list) else {}
    root, parent = card.get("root"), card.get("parent")
    if not isinstance(root, str) or not root:
        return openai_identity(parsed.name, str(client.base_url))
    return f"{parsed.name} root={root}" + (f" parent={parent}" if isinstance(parent, str) and parent else "")


def _open_local(name: str, common: dict) -> ChatModel:
    from amd.llm.local import DEFAULT_N_CTX, LocalServer, gguf_path, server_threads

    weights = LOCAL_WEIGHTS[name]
    params = common["params"]
    threads = server_threads(params.get("threads"))
    server = LocalServer(gguf_path(weights), alias=name, n_ctx=int(params.get("n_ctx") or DEFAULT_N_CTX),
                         threads=threads)
    client = sdk_client(params, api_key="local", base_url=server.base_url)
    # These models never fill tool_calls here: the prompt carries the tool docs, the text parser reads calls.
    # The thread count is part of the identity: llama.cpp's greedy replies change with it (amd.llm.local).
    return ChatModel(**common, identity=f"local:{name}@sha256:{weights.sha256}/threads={threads}", client=client,
                     native_tools=False, on_close=server.stop)
