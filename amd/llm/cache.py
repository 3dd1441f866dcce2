"""The persistent response cache: one JSON file per request key, written atomically.

The key is the sha256 of canonical JSON of everything that determines the answer (model identity, messages,
tools sent, sampling parameters) and nothing about transport (URL, port, timeouts, retries, API key). Files are
written to a temporary name and renamed, so concurrent threads and processes never see a partial file; two
writers of one key write the same reply, and the last rename wins.
"""

import hashlib
import json
import os
import tempfile
from pathlib import Path


def canonical_json(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def request_key(key_inputs: dict) -> str:
    return hashlib.sha256(canonical_json(key_inputs).encode()).hexdigest()


class ResponseCache:
    def __init__(self, root: Path):
        self.root = Path(root)

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict | None:
        """The stored reply fields, or None when absent or unreadable."""
        try:
            return json.loads(self._path(key).read_text())["reply"]
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, key: str, key_inputs: dict, reply: dict) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{key[:8]}-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(canonical_json({"key_inputs": key_inputs, "reply": reply}))
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
