"""A lean HTTP transport under the openai SDK for model servers on this machine (the embedded llama.cpp server,
`amd serve-run`'s vLLM): the SDK builds, authenticates, checks and parses every request as usual; only the bytes go
through the standard library's `http.client` instead of httpx's own stack, which costs about 0.3 ms more CPU per
request through the SDK (bench/RESULTS.md): a fifth of a pipeline step against a fast local server.

Only plain-HTTP loopback URLs get it (`is_loopback_http`): no TLS, no proxies, no redirects to handle. Each thread
keeps one keep-alive connection per server; a connection the server has closed is replaced before it is used.
Every failure is raised as the httpx error the SDK expects, so the SDK's mapping to APIConnectionError and
APITimeoutError, and amd's retries above it, work unchanged.
"""

import http.client
import ipaddress
import select
import socket
import threading
from urllib.parse import urlsplit

import httpx2

LOOPBACK_NAMES = {"localhost"}


def is_loopback_http(url: str | None) -> bool:
    if not url:
        return False
    parts = urlsplit(str(url))
    if parts.scheme != "http" or not parts.hostname:
        return False
    if parts.hostname in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(parts.hostname).is_loopback
    except ValueError:
        return False


class LoopbackTransport(httpx2.BaseTransport):
    def __init__(self):
        self._local = threading.local()
        self._all: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        timeout = _timeout_s(request)
        connection = self._connection(request.url.host, request.url.port or 80, timeout)
        try:
            connection.putrequest(request.method, request.url.raw_path.decode("ascii"), skip_host=True,
                                  skip_accept_encoding=True)
            for name, value in request.headers.raw:
                if name.lower() != b"accept-encoding":  # identity: http.client does not decompress
                    connection.putheader(name, value)
            connection.endheaders(request.read())
            reply = connection.getresponse()
            content = reply.read()
        except (OSError, http.client.HTTPException) as error:
            connection.close()
            raise _as_httpx_error(error, request) from error
        except BaseException:
            connection.close()
            raise
        return httpx2.Response(reply.status, headers=reply.getheaders(), content=content, request=request)

    def close(self) -> None:
        with self._lock:
            for connection in self._all:
                connection.close()
            self._all.clear()

    def _connection(self, host: str, port: int, timeout: float | None) -> http.client.HTTPConnection:
        connections = self._local.__dict__.setdefault("connections", {})
        connection = connections.get((host, port))
        if connection is None:
            connection = http.client.HTTPConnection(host, port, timeout=timeout)
            connections[(host, port)] = connection
            with self._lock:
                self._all.append(connection)
        elif connection.sock is not None and _closed_by_peer(connection.sock):
            connection.close()  # reconnects on the next request
        connection.timeout = timeout
        if connection.sock is not None:
            connection.sock.settimeout(timeout)
        return connection


def _timeout_s(request: httpx2.Request) -> float | None:
    timeouts = request.extensions.get("timeout") or {}
    values = [value for value in (timeouts.get("connect"), timeouts.get("read"), timeouts.get("write"))
              if value is not None]
    return max(values) if values else None


def _closed_by_peer(sock: socket.socket) -> bool:
    """An idle keep-alive socket that is readable has been closed (or sent garbage): do not reuse it."""
    readable, _, _ = select.select([sock], [], [], 0)
    return bool(readable)


def _as_httpx_error(error: Exception, request: httpx2.Request) -> httpx2.RequestError:
    message = f"{type(error).__name__}: {error}"
    if isinstance(error, TimeoutError):
        return httpx2.ReadTimeout(message, request=request)
    if isinstance(error, ConnectionRefusedError | socket.gaierror):
        return httpx2.ConnectError(message, request=request)
    return httpx2.RemoteProtocolError(message, request=request)
