"""File helpers used across amd: a streamed sha256, and writing a file so that readers never see half of it."""

import contextlib
import hashlib
import os
import tempfile
from pathlib import Path

CHUNK = 8 << 20


def sha256_file(path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


@contextlib.contextmanager
def atomic_file(path, mode: str = "w", durable: bool = True):
    """Write `path` through a temporary file in the same folder, renamed into place on success (fsynced first when
    `durable`; a cache that can be rebuilt skips that); on any error the temporary file is removed and `path` is
    left as it was."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-", suffix=".tmp")
    try:
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as handle:
            yield handle
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
