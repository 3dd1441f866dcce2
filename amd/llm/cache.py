"""The persistent response cache: one small JSON file per request key, holding the key and the reply, written
atomically.

The key is the sha256 of the model identity and of the exact request body sent (model name, messages, tools,
sampling parameters, extra body): everything that determines the answer, and nothing about transport (URL, port,
timeouts, retries, API key), which travels outside the body. The body is encoded anyway to be sent, so the key
costs one pass of sha256 over it. Files are written to a temporary name and renamed, so concurrent threads and
processes never see a partial file; two writers of one key write the same reply, and the last rename wins.
"""

import hashlib
import json
from pathlib import Path

from amd.files import atomic_file


def request_key(identity: str, body: bytes) -> str:
    digest = hashlib.sha256(json.dumps(identity).encode())  # a JSON string ends unambiguously before the body
    digest.update(body)
    return digest.hexdigest()


class ResponseCache:
    def __init__(self, root: Path):
        self.root = Path(root)

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict | None:
        """The stored reply fields, or None when absent, unreadable or stored under another key."""
        try:
            stored = json.loads(self._path(key).read_bytes())
            return stored["reply"] if stored["key"] == key else None
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, key: str, reply: dict) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_file(path, durable=False) as handle:  # json.dumps: json.dump would encode in pure Python
            handle.write(json.dumps({"key": key, "reply": reply}, ensure_ascii=False, separators=(",", ":")))
