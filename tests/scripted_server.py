"""A real OpenAI-compatible HTTP server on 127.0.0.1 for tests and bench scripts (a test double).

    with ScriptedServer(script(Fault(status=429, retry_after="0"), "hello")) as server:
        ...  # point a client at server.url; server.requests holds every request received

`respond(request_json)` returns what to answer: a str (text content), a `ToolCalls` (native tool calls), a `Cut`
(text cut at the token limit: finish_reason "length"), or a `Fault` (an HTTP status with optional Retry-After, a
garbage body, a delay, a dropped connection).
`latency_s` delays every answer; `capacity` bounds how many requests are served in parallel.
"""

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Fault:
    status: int | None = None  # answer with this HTTP status and an OpenAI-style error body
    retry_after: str | None = None  # Retry-After header value
    body: str | None = None  # send this raw body with status 200 (garbage, or JSON of the wrong shape)
    content_type: str = "application/json"
    delay_s: float = 0.0  # wait this long first (longer than the client's timeout: a timeout)
    drop: bool = False  # close the connection without answering


@dataclass
class ToolCalls:
    calls: list[dict]  # [{"name": str, "arguments": str (raw JSON)}]
    content: str | None = None


@dataclass
class Cut:
    content: str  # answered with finish_reason "length", as a server does when max_tokens ends the reply


@dataclass
class Received:
    path: str
    headers: dict  # names in lower case
    body: dict | None


def _lower_keys(headers) -> dict:
    return {name.lower(): value for name, value in headers.items()}


def script(*replies):
    """A respond function that answers with `replies` in order, then repeats the last one."""
    queue, lock = list(replies), threading.Lock()

    def respond(_request):
        with lock:
            return queue.pop(0) if len(queue) > 1 else queue[0]

    return respond


def echo_last_user(request: dict) -> str:
    users = [m.get("content") for m in request.get("messages", []) if m.get("role") == "user"]
    return f"echo: {users[-1] if users else ''}"


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # a listen backlog for many clients connecting at once (the concurrency bench: 64)


@dataclass
class ScriptedServer:
    respond: callable = echo_last_user
    latency_s: float = 0.0
    capacity: int | None = None
    model: str = "scripted-model"
    root: str | None = None  # what /models says the model is served from (vLLM: the checkpoint); None: not said
    cached_tokens: int | None = None  # reported as usage.prompt_tokens_details.cached_tokens when set
    embed: callable = lambda text: [float(len(text)), 1.0]  # the /embeddings answer for one text
    port: int = 0  # 0: a free one
    requests: list[Received] = field(default_factory=list)

    def __post_init__(self):
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(self.capacity) if self.capacity else None
        self.in_flight = self.max_in_flight = 0
        self.busy_s = 0.0  # time spent inside request handlers (the "model" side), for overhead benches
        self._httpd = _HTTPServer(("127.0.0.1", self.port), _handler_for(self))
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def chat_requests(self) -> list[Received]:
        with self._lock:
            return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._httpd.shutdown()
        self._httpd.server_close()

    def _record(self, received: Received) -> None:
        with self._lock:
            self.requests.append(received)

    def _add_busy(self, seconds: float) -> None:
        with self._lock:
            self.busy_s += seconds

    def _enter_slot(self) -> None:
        if self._slots:
            self._slots.acquire()
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _leave_slot(self) -> None:
        with self._lock:
            self.in_flight -= 1
        if self._slots:
            self._slots.release()


def _embeddings(server, request: dict) -> dict:
    """An OpenAI-style embeddings answer: each input text as `server.embed(text)` (a list of floats)."""
    texts = request["input"] if isinstance(request["input"], list) else [request["input"]]
    data = [{"object": "embedding", "index": i, "embedding": server.embed(text)} for i, text in enumerate(texts)]
    return {"object": "list", "data": data, "model": request.get("model"), "usage": {"prompt_tokens": 1, "total_tokens": 1}}


def _completion(server, request: dict, content: str | None, tool_calls: list[dict] | None,
                finish_reason: str = "stop") -> dict:
    prompt_chars = sum(len(str(m.get("content") or "")) for m in request.get("messages", []))
    message = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [{"id": f"call_{i}", "type": "function", "function": call}
                                 for i, call in enumerate(tool_calls)]
    usage = {"prompt_tokens": prompt_chars // 4 + 1, "completion_tokens": len((content or "").split()) + 1,
             "total_tokens": prompt_chars // 4 + len((content or "").split()) + 2}
    if server.cached_tokens is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": server.cached_tokens}
    return {
        "id": "chatcmpl-scripted", "object": "chat.completion", "created": int(time.time()), "model": server.model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else finish_reason}],
        "usage": usage,
    }


def _handler_for(server: ScriptedServer):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # else headers and body in two segments cost a 40 ms delayed ACK

        def log_message(self, *args):
            pass

        def do_GET(self):
            server._record(Received(self.path, _lower_keys(self.headers), None))
            if self.path.rstrip("/").endswith("/models"):
                card = {"id": server.model, "object": "model", **({"root": server.root} if server.root else {})}
                self._send(200, json.dumps({"object": "list", "data": [card]}))
            else:
                self._send(404, json.dumps({"error": {"message": f"no route {self.path}"}}))

        def do_POST(self):
            started = time.perf_counter()
            try:
                self._post()
            finally:
                server._add_busy(time.perf_counter() - started)

        def _post(self):
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
            server._record(Received(self.path, _lower_keys(self.headers), body))
            if self.path.rstrip("/").endswith("/embeddings") and body is not None:
                self._send(200, json.dumps(_embeddings(server, body)))
                return
            if not self.path.rstrip("/").endswith("/chat/completions") or body is None:
                self._send(404 if body is not None else 400, json.dumps({"error": {"message": "bad request"}}))
                return
            server._enter_slot()
            try:
                time.sleep(server.latency_s)
                self._answer(body, server.respond(body))
            finally:
                server._leave_slot()

        def _answer(self, body: dict, reply) -> None:
            if isinstance(reply, str):
                self._send(200, json.dumps(_completion(server, body, reply, None)))
            elif isinstance(reply, ToolCalls):
                self._send(200, json.dumps(_completion(server, body, reply.content, reply.calls)))
            elif isinstance(reply, Cut):
                self._send(200, json.dumps(_completion(server, body, reply.content, None, "length")))
            elif isinstance(reply, Fault):
                self._fault(reply)
            else:
                raise TypeError(f"respond() returned {type(reply).__name__}; expected str, ToolCalls, Cut or Fault")

        def _fault(self, fault: Fault) -> None:
            time.sleep(fault.delay_s)
            if fault.drop:
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            headers = {"Retry-After": fault.retry_after} if fault.retry_after is not None else {}
            if fault.body is not None:
                self._send(fault.status or 200, fault.body, fault.content_type, headers)
            else:
                error = {"error": {"message": f"scripted fault {fault.status}", "type": "scripted"}}
                self._send(fault.status or 500, json.dumps(error), headers=headers)

        def _send(self, status: int, text: str, content_type: str = "application/json", headers=None):
            data = text.encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # the client gave up (a timeout test)

    return Handler
