import os
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))  # test doubles such as scripted_server


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    """Every test gets its own amd cache, so response caches never leak between tests."""
    if "AMD_TEST_SHARED_CACHE" not in os.environ:
        monkeypatch.setenv("AMD_CACHE_DIR", str(tmp_path / "amd-cache"))
