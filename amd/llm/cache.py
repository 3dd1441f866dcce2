"""The persistent response cache: one small JSON file per request key, holding the key and the reply, written
atomically.

The key is the sha256 of the model identity and of the exact request body sent (model name, messages, tools,
sampling parameters, extra body): everything that determines the answer, and nothing about transport (URL, port,
timeouts, retries, API key), which travels outside the body. The body is encoded anyway to be sent, so the key
costs one pass of sha256 over it. Files are written to a temporary name and renamed, so concurrent threads and
processes never see a partial file; two writers of one key write the same reply, and the last rename wins.

The cache heals: a file that cannot be read, or holds what is not a reply, is a miss, named in a warning and
replaced by the next reply. A cache that cannot be written (a full disk) is a warning, never a lost reply.
"""

import hashlib
import json
import logging
from pathlib import Path

from amd.core.files import atomic_file

log = logging.getLogger("amd.llm")


def request_key(identity: str, body: bytes) -> str:
    digest = hashlib.sha256(json.dumps(identity).encode())  # a JSON string ends unambiguously before the body
    digest.update(body)
    return digest.hexdigest()


class ResponseCache:
    def __init__(self, root: Path):
        self.root = Path(root)
        self._write_failed = False

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict | None:
        """The stored reply fields, or None when absent; a file that cannot be read or is stored under another key
        is a miss too, and named in a warning."""
        path = self.path(key)
        try:
            stored = json.loads(path.read_bytes())
            if stored["key"] == key and isinstance(stored["reply"], dict):
                return stored["reply"]
            why = "it is stored under another key"
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as error:
            why = f"{type(error).__name__}: {error}"
        self.discard(key, why)
        return None

    def discard(self, key: str, why: str) -> None:
        """Drop an unusable cache file, saying which and why; the request is sent again and its reply replaces it."""
        log.warning("response cache %s is unusable (%s): asking the model again", self.path(key), why[:200])
        self.path(key).unlink(missing_ok=True)

    def put(self, key: str, reply: dict) -> None:
        path = self.path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with atomic_file(path, durable=False) as handle:  # json.dumps: json.dump would encode in pure Python
                handle.write(json.dumps({"key": key, "reply": reply}, ensure_ascii=False, separators=(",", ":")))
        except OSError as error:
            if not self._write_failed:  # once: a full disk would repeat it for every reply
                log.warning("cannot write the response cache (%s: %s): replies are used but not cached until it "
                            "can be written", error.filename or path, error.strerror)
            self._write_failed = True
