"""Where amd keeps caches and scratch state. Override with AMD_CACHE_DIR."""

import os
from pathlib import Path


def cache_dir(*parts: str) -> Path:
    root = Path(os.environ.get("AMD_CACHE_DIR") or Path.cwd() / ".amd" / "cache")
    path = root.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path
