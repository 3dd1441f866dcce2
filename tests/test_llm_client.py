"""ChatModel against a real HTTP test double: cache, retries (the SDK's, and amd's for malformed bodies), request
counts, finish reasons, faults, concurrency, secrets."""

import json
import threading
import time
from pathlib import Path

import pytest
from scripted_server import Cut, Fault, ScriptedServer, ToolCalls, echo_last_user, script

from amd.core.errors import AmdError
from amd.core.net import free_port
from amd.llm import open_model
from amd.llm.base import ModelUnreachable
from amd.llm.client import ChatModel, resolve_params, sdk_client

FAST = {"max_retries": 3, "timeout_s": 5}
HELLO = [{"role": "user", "content": "hello"}]


@pytest.fixture(autouse=True)
def cache_root(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("AMD_CACHE_DIR", str(root))
    return root


def vllm(server, model="test-model", **params):
    return open_model(f"vllm:{model}@{server.url}", {**FAST, **params})


def test_second_identical_chat_is_served_from_cache_without_a_request():
    with ScriptedServer() as server, vllm(server) as model:
        first = model.chat(HELLO)
        second = model.chat(HELLO)
    assert len(server.chat_requests()) == 1
    assert (first.cached, first.requests, second.cached, second.requests) == (False, 1, True, 0)
    assert second.text == first.text == "echo: hello"
    assert (second.prompt_tokens, second.completion_tokens) == (first.prompt_tokens, first.completion_tokens) != (0, 0)
    assert (model.ledger.requests, model.ledger.cache_hits) == (1, 1)


def test_prompt_tokens_served_from_the_servers_prefix_cache_are_counted():
    with ScriptedServer(cached_tokens=7) as server, vllm(server) as model:
        first = model.chat(HELLO)
        again = model.chat(HELLO)
        other = model.chat([{"role": "user", "content": "other"}])
    assert (first.cached_prompt_tokens, again.cached_prompt_tokens, other.cached_prompt_tokens) == (7, 7, 7)
    assert again.cached and model.ledger.cached_prompt_tokens == 21
    with ScriptedServer() as server, vllm(server, model="silent") as model:
        assert model.chat(HELLO).cached_prompt_tokens == 0  # a server that does not say


def test_cache_survives_a_new_model_object_and_another_server_port():
    """The same checkpoint served again (another port, another object): the rerun asks the model nothing."""
    with ScriptedServer(model="test-model", root="/ckpt/a") as a, vllm(a) as model:
        model.chat(HELLO)
    with ScriptedServer(model="test-model", root="/ckpt/a") as b, vllm(b, timeout_s=9, max_retries=1) as model:
        reply = model.chat(HELLO)
        assert model.identity == "vllm:test-model root=/ckpt/a"
    assert reply.cached and not b.chat_requests()


def test_two_vllm_servers_of_different_checkpoints_under_one_name_never_share_replies():
    replies = []
    for root, answer in (("/ckpt/a", "from checkpoint a"), ("/ckpt/b", "from checkpoint b")):
        with ScriptedServer(script(answer), model="test-model", root=root) as server, vllm(server) as model:
            replies.append((model.chat(HELLO).text, model.chat(HELLO).cached))
    assert replies == [("from checkpoint a", True), ("from checkpoint b", True)]


def test_a_vllm_server_that_does_not_say_what_it_serves_is_keyed_on_its_url_too():
    replies = []
    for answer in ("from the first server", "from the second server"):
        with ScriptedServer(script(answer), model="test-model") as server, vllm(server) as model:
            replies.append(model.chat(HELLO).text)
            assert model.identity == f"vllm:test-model@{server.url}"
    assert replies == ["from the first server", "from the second server"]


def test_a_vllm_server_that_cannot_be_asked_what_it_serves_is_unreachable_never_a_reply():
    url = f"http://127.0.0.1:{free_port()}/v1"
    with open_model(f"vllm:test-model@{url}", {**FAST, "max_retries": 0}) as model, \
            pytest.raises(ModelUnreachable, match=rf"^model test-model: cannot reach {url}: .* \(1 requests\)$"):
        model.chat(HELLO)


LS_TOOL = [{"type": "function", "function": {"name": "ls", "parameters": {"type": "object", "properties": {}}}}]


@pytest.mark.parametrize("change", [
    {"messages": [{"role": "user", "content": "hello!"}]},
    {"tools": LS_TOOL},
    {"params": {"temperature": 0.7}},
    {"params": {"seed": 1}},
    {"params": {"max_tokens": 64}},
    {"params": {"top_p": 0.9}},
    {"model": "other-model"},
])
def test_cache_key_changes_with_what_determines_the_answer(change):
    with ScriptedServer() as server:
        with vllm(server) as model:
            model.chat(HELLO)
        with vllm(server, change.get("model", "test-model"), **change.get("params", {})) as model:
            reply = model.chat(change.get("messages", HELLO), change.get("tools"))
    assert not reply.cached and len(server.chat_requests()) == 2


def test_a_cache_file_holds_the_key_and_the_reply_not_the_request(cache_root):
    long_prompt = [{"role": "user", "content": "a long prompt " * 1000}]
    with ScriptedServer(script("short answer")) as server, vllm(server) as model:
        model.chat(long_prompt, LS_TOOL)
    [path] = list(cache_root.rglob("*.json"))
    stored = json.loads(path.read_text())
    assert stored["key"] == path.stem and stored["reply"]["text"] == "short answer"
    assert "a long prompt" not in path.read_text() and path.stat().st_size < 300


def test_finish_reason_is_recorded_and_cached_and_cut_replies_are_counted():
    with ScriptedServer(script(Cut("half a rep"), "whole")) as server, vllm(server) as model:
        cut, again, whole = model.chat(HELLO), model.chat(HELLO), model.chat([{"role": "user", "content": "hi"}])
    assert (cut.text, cut.finish_reason, cut.cached) == ("half a rep", "length", False)
    assert (again.finish_reason, again.cached) == ("length", True)
    assert whole.finish_reason == "stop" and model.ledger.cut_replies == 2


def test_cache_off_always_asks():
    with ScriptedServer() as server, vllm(server, cache=False) as model:
        replies = [model.chat(HELLO) for _ in range(2)]
    assert [r.cached for r in replies] == [False, False] and len(server.chat_requests()) == 2


def test_defaults_and_sampling_params_reach_the_server():
    with ScriptedServer() as server, vllm(server, top_p=0.5) as model:
        model.chat(HELLO)
    body = server.chat_requests()[0].body
    assert (body["temperature"], body["max_tokens"], body["seed"], body["top_p"]) == (0, 512, 0, 0.5)
    assert "chat_template_kwargs" not in body and "tools" not in body


@pytest.mark.parametrize("fault", [
    Fault(status=500),
    Fault(status=503),
    Fault(status=429),
    Fault(drop=True),
    Fault(body="this is not json {"),
    Fault(body="<html>oops</html>", content_type="text/html"),
    Fault(body='{"object": "chat.completion"}'),
    Fault(body='{"choices": [{"index": 0}]}'),
], ids=["500", "503", "429", "drop", "garbage", "html", "no-choices", "no-message"])
def test_faults_are_retried_until_a_good_reply(fault):
    with ScriptedServer(script(fault, fault, "done")) as server, vllm(server) as model:
        reply = model.chat(HELLO)
    assert (reply.text, reply.error, reply.requests) == ("done", None, 3)
    assert len(server.chat_requests()) == 3


def test_http_faults_and_malformed_bodies_share_one_retry_budget():
    with ScriptedServer(script(Fault(status=500), Fault(body="garbage"), "done")) as server, \
            vllm(server, max_retries=1) as model:
        reply = model.chat(HELLO)
    assert reply.error.startswith("malformed response") and reply.requests == 2 == len(server.chat_requests())


def test_timeout_is_retried():
    with ScriptedServer(script(Fault(delay_s=1.5), "done")) as server, vllm(server, timeout_s=0.3) as model:
        reply = model.chat(HELLO)
    assert (reply.text, reply.requests) == ("done", 2)


def test_retry_after_is_honoured():
    with ScriptedServer(script(Fault(status=429, retry_after="1"), "done")) as server, vllm(server) as model:
        start = time.monotonic()
        reply = model.chat(HELLO)
        waited = time.monotonic() - start
    assert reply.text == "done" and waited >= 0.95


@pytest.mark.parametrize(("status", "tries"), [(503, 3), (500, 3), (429, 3), (404, 1)])
def test_a_server_that_stays_faulty_is_unreachable_not_a_reply(status, tries):
    """After the SDK's retries (none for a 404: no such model there), a server fault raises: an infrastructure
    error is never a verdict; nothing is cached."""
    with ScriptedServer(script(Fault(status=status))) as server, vllm(server, max_retries=2) as model:
        for _ in range(2):
            with pytest.raises(ModelUnreachable, match=rf"model test-model: HTTP {status} from {server.url}"):
                model.chat(HELLO)
    assert len(server.chat_requests()) == 2 * tries and model.ledger.replies == 0


@pytest.mark.parametrize("status", [400, 413, 422])
def test_a_refused_request_is_the_models_error_reply_and_not_retried(status):
    with ScriptedServer(script(Fault(status=status))) as server, vllm(server) as model:
        reply = model.chat(HELLO)
    assert reply.error.startswith(f"HTTP {status}") and reply.requests == 1
    assert (model.ledger.failures, model.ledger.requests) == (1, 1)


def test_unreachable_server_raises_naming_it():
    url = f"http://127.0.0.1:{free_port()}/v1"
    with open_model(f"vllm:m@{url}", {**FAST, "max_retries": 2}) as model, \
            pytest.raises(ModelUnreachable, match=rf"^model m: cannot reach {url}: .* \(3 requests\)$"):
        model.chat(HELLO)


def test_a_reply_past_the_timeout_on_every_try_is_unreachable():
    with ScriptedServer(script(Fault(delay_s=1.0))) as server, vllm(server, timeout_s=0.2, max_retries=1) as model, \
            pytest.raises(ModelUnreachable, match=rf"no reply from {server.url} within 0.2 s"):
        model.chat(HELLO)


def test_eight_threads_chat_concurrently():
    """The server answers no request until all eight are in flight at once: a client that sent them one at a time
    would get no answer to its first (the barrier breaks after 60 s and the replies say so)."""
    all_in = threading.Barrier(8, timeout=60)

    def together(request):
        try:
            all_in.wait()
        except threading.BrokenBarrierError:
            return "not all at once"
        return echo_last_user(request)

    with ScriptedServer(together, capacity=8) as server, vllm(server, timeout_s=120) as model:
        replies = [None] * 8

        def ask(i):
            replies[i] = model.chat([{"role": "user", "content": f"q{i}"}])

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert [r.text for r in replies] == [f"echo: q{i}" for i in range(8)]
    assert server.max_in_flight == 8 and len(server.chat_requests()) == 8
    assert model.ledger.requests == 8 and model.ledger.prompt_tokens == sum(r.prompt_tokens for r in replies)


def test_qwen3_on_vllm_gets_thinking_switched_off():
    with ScriptedServer() as server, vllm(server, "Qwen/Qwen3-8B") as model:
        model.chat(HELLO)
    body = server.chat_requests()[0].body
    assert body["chat_template_kwargs"] == {"enable_thinking": False} and body["model"] == "Qwen/Qwen3-8B"


def test_native_tools_are_sent_and_tool_calls_returned():
    tools = [{"type": "function", "function": {"name": "ls", "parameters": {"type": "object", "properties": {}}}}]
    calls = [{"name": "ls", "arguments": '{"a": true}'}]
    with ScriptedServer(script(ToolCalls(calls))) as server, vllm(server) as model:
        reply = model.chat(HELLO, tools)
        assert model.native_tools
    assert server.chat_requests()[0].body["tools"] == tools
    assert reply.tool_calls == calls and reply.text == ""


def test_each_request_carries_its_own_tool_list_and_messages():
    """The tool docs are encoded once per list: a new list (another agent, another thread) must not reuse them."""
    first = [{"type": "function", "function": {"name": "ls", "parameters": {"type": "object", "properties": {}}}}]
    second = [{"type": "function", "function": {"name": "cd", "description": "é ☃", "parameters": {}}}]
    with ScriptedServer() as server, vllm(server, cache=False) as model:
        for tools, text in ((first, "a"), (first, "b"), (second, "c"), (first, "d")):
            model.chat([{"role": "user", "content": text}], tools)
    sent = [(r.body["tools"], r.body["messages"][0]["content"]) for r in server.chat_requests()]
    assert sent == [(first, "a"), (first, "b"), (second, "c"), (first, "d")]
    assert all(r.headers["content-type"] == "application/json" for r in server.chat_requests())


def test_a_model_without_native_tools_does_not_send_them():
    tools = [{"type": "function", "function": {"name": "ls", "parameters": {}}}]
    with ScriptedServer() as server:
        client = sdk_client(resolve_params(FAST), api_key="x", base_url=server.url)
        with ChatModel(spec="local:test", model="m", identity="local:test", client=client,
                       params=resolve_params(FAST), native_tools=False) as model:
            model.chat(HELLO, tools)
    assert "tools" not in server.chat_requests()[0].body


def test_api_key_is_sent_but_never_written(monkeypatch, cache_root, caplog):
    sentinel = "sk-SENTINEL-4b1d0c7e"
    with ScriptedServer(script(Fault(status=500), "ok")) as server:
        monkeypatch.setenv("OPENAI_API_KEY", sentinel)
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        with caplog.at_level("DEBUG"), open_model("openai:gpt-test", FAST) as model:
            model.chat(HELLO)
            assert model.chat(HELLO).cached
    first = server.chat_requests()[0]
    assert first.headers["authorization"] == f"Bearer {sentinel}"
    assert "max_completion_tokens" in first.body and "max_tokens" not in first.body
    files = [p for p in Path(cache_root).rglob("*") if p.is_file()]
    assert files and not any(sentinel.encode() in p.read_bytes() for p in files)
    assert sentinel not in caplog.text


def test_openai_replies_are_cached_per_server(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    replies = []
    for answer in ("from the first server", "from the second server"):
        with ScriptedServer(script(answer)) as server:
            monkeypatch.setenv("OPENAI_BASE_URL", server.url)
            with open_model("openai:gpt-test", FAST) as model:
                replies.append((model.chat(HELLO).text, model.chat(HELLO).cached))
    assert replies == [("from the first server", True), ("from the second server", True)]


def test_the_openai_api_itself_is_keyed_on_the_model_name(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with open_model("openai:gpt-4o") as model:
        assert model.identity == "openai:gpt-4o"
    monkeypatch.setenv("OPENAI_BASE_URL", "https://user:secret@proxy.example:8443/v1/")
    with open_model("openai:gpt-4o") as model:
        assert model.identity == "openai:gpt-4o@https://proxy.example:8443/v1"


def test_openai_without_a_key_is_a_one_line_error(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(AmdError, match=r"^openai:gpt-4o needs OPENAI_API_KEY$"):
        open_model("openai:gpt-4o")


def test_endpoints_of_their_own_with_keys_of_their_own_coexist(monkeypatch, cache_root, caplog):
    """A teacher and a user simulator on two OpenAI-compatible endpoints, each with the key its spec names; the
    OpenAI key goes to neither, and no key is written anywhere."""
    keys = {"FIRST_ENDPOINT_KEY": "sk-first-5e1f", "SECOND_ENDPOINT_KEY": "sk-second-77aa"}
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-never-sent")
    for name, value in keys.items():
        monkeypatch.setenv(name, value)
    with ScriptedServer(script("one")) as first, ScriptedServer(script("two")) as second, caplog.at_level("DEBUG"):
        with open_model(f"openai:teacher@{first.url}#key=FIRST_ENDPOINT_KEY", FAST) as teacher, \
                open_model(f"vllm:user@{second.url}#key=SECOND_ENDPOINT_KEY", FAST) as user:
            assert (teacher.chat(HELLO).text, user.chat(HELLO).text) == ("one", "two")
            assert teacher.identity == f"openai:teacher@{first.url}" and user.identity == f"vllm:user@{second.url}"
        with open_model(f"openai:keyless@{first.url}", FAST) as keyless:
            keyless.chat(HELLO)
    sent = [request.headers["authorization"] for request in first.chat_requests() + second.chat_requests()]
    assert sent == ["Bearer sk-first-5e1f", "Bearer EMPTY", "Bearer sk-second-77aa"]
    files = [path for path in Path(cache_root).rglob("*") if path.is_file()]
    assert files and not any(value.encode() in path.read_bytes() for path in files for value in keys.values())
    assert not any(value in caplog.text for value in keys.values())


def test_a_key_variable_that_is_not_set_is_named_in_one_line(monkeypatch):
    monkeypatch.delenv("GPU_NODE_KEY", raising=False)
    with pytest.raises(AmdError, match=r"^vllm:m@http://h:1/v1#key=GPU_NODE_KEY needs its key in the environment "
                                       r"variable GPU_NODE_KEY, which is not set$"):
        open_model("vllm:m@http://h:1/v1#key=GPU_NODE_KEY")


def test_unknown_parameter_is_named():
    with pytest.raises(AmdError, match="temprature"):
        open_model("vllm:m@http://127.0.0.1:1/v1", {"temprature": 0})


def test_the_sdks_telemetry_headers_are_not_sent():
    with ScriptedServer() as server, vllm(server) as model:
        model.chat(HELLO)
    headers = server.chat_requests()[0].headers
    assert headers["authorization"] == "Bearer EMPTY"
    assert not [name for name in headers if name.startswith("x-stainless")]


def test_qwen3_thinking_is_off_unless_asked_and_only_for_qwen3_on_vllm():
    from amd.llm import open_model

    with ScriptedServer(lambda request: "ok") as server:
        for think in (False, True):
            with open_model(f"vllm:Qwen/Qwen3-4B@{server.url}", {**FAST, "think": think, "cache": False}) as model:
                model.chat([{"role": "user", "content": "hi"}])
        bodies = [request.body for request in server.chat_requests()]
    assert [b["chat_template_kwargs"]["enable_thinking"] for b in bodies] == [False, True]
    with pytest.raises(AmdError, match="Qwen3 models only"):
        open_model("vllm:meta-llama/Llama-3.1-8B-Instruct@http://127.0.0.1:9/v1", {"think": True})


def test_official_prompting_sends_the_benchmark_messages_alone():
    from amd.agent.agents import ModelAgent
    from amd.agent.hooks import as_retrieved_memory
    from amd.llm import open_model

    tools = [{"type": "function", "function": {"name": "ls", "description": "List.", "parameters": {
        "type": "object", "properties": {}}}}]
    with ScriptedServer(lambda request: "done") as server:
        for prompting, memory in (("official", ""), ("official", "MEMORY"), ("amd", "")):
            with open_model(f"vllm:student@{server.url}", {**FAST, "prompting": prompting, "cache": False}) as model:
                agent = ModelAgent(model)
                agent.begin(tools, memory)
                agent.add_user("List my files.")
                agent.act()
        sent = [request.body["messages"] for request in server.chat_requests()]
    assert sent[0] == [{"role": "user", "content": "List my files."}]
    assert sent[1][0] == {"role": "system", "content": as_retrieved_memory("MEMORY")} and len(sent[1]) == 2
    assert sent[2][0]["role"] == "system" and "MEMORY" not in sent[2][0]["content"] and len(sent[2][0]["content"]) > 20
    with pytest.raises(AmdError, match="unknown prompting"):
        open_model(f"vllm:student@{server.url}", {"prompting": "bfcl"})


def test_a_sampling_override_is_sent_for_one_request_and_keys_the_cache():
    with ScriptedServer() as server, vllm(server, temperature=0, seed=0) as model:
        plain = model.chat(HELLO)
        samples = [model.chat(HELLO, sampling={"temperature": 0.7, "seed": seed}) for seed in (1000, 1001)]
        repeat = model.chat(HELLO, sampling={"temperature": 0.7, "seed": 1001})
        after = model.chat(HELLO)
        with pytest.raises(AmdError, match="unknown sampling parameter"):
            model.chat(HELLO, sampling={"temprature": 1})
    sent = [(r.body["temperature"], r.body["seed"]) for r in server.chat_requests()]
    assert sent == [(0, 0), (0.7, 1000), (0.7, 1001)]  # each seed its own request; the run's params unchanged
    assert not plain.cached and not any(s.cached for s in samples) and repeat.cached and after.cached
