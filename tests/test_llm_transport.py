"""The loopback transport under the openai SDK: which URLs get it, keep-alive reuse, servers that close idle
connections, and failures surfacing as the SDK's own errors (the fault tests in test_llm_client run through it too)."""

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import openai
import pytest
from scripted_server import ScriptedServer

from amd.llm import open_model
from amd.llm.client import sdk_client
from amd.llm.local import free_port
from amd.llm.transport import LoopbackTransport, is_loopback_http

HELLO = [{"role": "user", "content": "hello"}]
REPLY = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}], "usage": {}}


@pytest.fixture(autouse=True)
def cache_root(tmp_path, monkeypatch):
    monkeypatch.setenv("AMD_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.parametrize("url, loopback", [
    ("http://127.0.0.1:8000/v1", True), ("http://localhost:8000/v1", True), ("http://[::1]:8000/v1", True),
    ("http://127.5.0.1/v1", True), ("https://127.0.0.1:8000/v1", False), ("http://10.0.0.5:8000/v1", False),
    ("http://gpu-node-3:8000/v1", False), (None, False), ("", False),
])
def test_only_plain_http_on_this_machine_gets_the_loopback_transport(url, loopback):
    assert is_loopback_http(url) is loopback
    client = sdk_client(api_key="x", base_url=url) if url else None
    if client is not None:
        assert isinstance(client._client._transport, LoopbackTransport) is loopback


class OneRequestPerConnection(BaseHTTPRequestHandler):
    """Answers one request, then closes the connection without saying so (as an idle keep-alive timeout does)."""
    protocol_version = "HTTP/1.1"
    connections = 0

    def setup(self):
        super().setup()
        type(self).connections += 1

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        data = json.dumps(REPLY).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()
        self.connection.shutdown(socket.SHUT_RDWR)
        self.close_connection = True


def test_a_connection_the_server_closed_is_replaced_before_use():
    server = ThreadingHTTPServer(("127.0.0.1", 0), OneRequestPerConnection)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        with open_model(f"vllm:m@{url}", {"cache": False, "max_retries": 0}) as model:
            replies = []
            for _ in range(5):
                threading.Event().wait(0.05)  # let the server's close arrive
                replies.append(model.chat(HELLO))
    finally:
        server.shutdown()
        server.server_close()
    assert [(r.text, r.error, r.requests) for r in replies] == [("hi", None, 1)] * 5
    assert OneRequestPerConnection.connections == 5


def test_keep_alive_reuses_one_connection_per_thread():
    with ScriptedServer() as server, open_model(f"vllm:m@{server.url}", {"cache": False}) as model:
        for index in range(10):
            model.chat([{"role": "user", "content": f"hello {index}"}])
        assert len(model._client._client._transport._all) == 1
    assert all(connection.sock is None for connection in model._client._client._transport._all)  # closed


def test_failures_are_the_sdks_own_errors():
    client = sdk_client(api_key="x", base_url=f"http://127.0.0.1:{free_port()}/v1", timeout=2)
    with pytest.raises(openai.APIConnectionError):
        client.post("/chat/completions", cast_to=object, body={"model": "m", "messages": HELLO})
    with ScriptedServer() as server:
        client = sdk_client(api_key="x", base_url=server.url, timeout=2)
        client.post("/chat/completions", cast_to=object, body={"model": "m", "messages": HELLO})
        sent = server.chat_requests()[0].headers
    assert "accept-encoding" not in sent and sent["host"] == server.url.split("/")[2]
