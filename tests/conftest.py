import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
sys.path.insert(0, str(TESTS))  # test doubles such as scripted_server

# What `make run` and the named targets leave in the checkout. A test never reads it: the suite must pass the same
# before and after them. Each test runs in its own folder (so relative paths such as results/ and .amd/ are its
# own), and reading these from a test's process by absolute path fails the test.
CHECKOUT_STATE = tuple(str(REPO / name) for name in ("results", ".amd"))
WATCHED_EVENTS = {"open", "os.listdir", "os.scandir"}


def _refuse_checkout_state(event: str, args: tuple) -> None:
    if event not in WATCHED_EVENTS or not args or not isinstance(args[0], (str, bytes, os.PathLike)):
        return
    path = os.path.abspath(os.fsdecode(args[0]))
    if any(path == root or path.startswith(root + os.sep) for root in CHECKOUT_STATE):
        raise PermissionError(f"a test read {path}: the checkout's results and caches are no test's input")


sys.addaudithook(_refuse_checkout_state)


def pytest_configure(config):
    """A cache for what runs before any test has its own (collection, module imports)."""
    if "AMD_TEST_SHARED_CACHE" not in os.environ:
        session_cache = tempfile.mkdtemp(prefix="amd-test-cache-")
        os.environ["AMD_CACHE_DIR"] = session_cache
        config.add_cleanup(lambda: shutil.rmtree(session_cache, ignore_errors=True))


@pytest.fixture(scope="session", autouse=True)
def _away_from_the_checkout(tmp_path_factory):
    """Module and session fixtures, too, run outside the checkout."""
    before = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("cwd"))
    yield
    os.chdir(before)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    """Every test runs in its own folder and gets its own amd cache, so neither the checkout's results/ and caches
    nor another test's response cache leak into it."""
    monkeypatch.chdir(tmp_path)
    if "AMD_TEST_SHARED_CACHE" not in os.environ:
        monkeypatch.setenv("AMD_CACHE_DIR", str(tmp_path / "amd-cache"))
