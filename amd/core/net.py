"""Local model servers: a free loopback port, and waiting until an OpenAI-compatible server answers."""

import socket
import time
import urllib.request


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_models(base_url: str, timeout: float, alive=lambda: True, poll_s: float = 0.2) -> bool:
    """True once GET {base_url}/models answers 200; False after `timeout` seconds or as soon as `alive()` is false
    (the server's process is gone)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and alive():
        try:
            with urllib.request.urlopen(f"{base_url}/models", timeout=5) as reply:
                if reply.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(poll_s)
    return False
