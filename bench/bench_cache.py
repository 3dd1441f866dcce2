"""What the response cache writes and costs per reply, on real BFCL requests (the agent loop against a replay
server, cache on), in today's format (the key and the reply) beside the format used until 2026-11-30 (the whole
canonical request beside the reply, keyed on its sha256), computed for the same requests and replies. CPU is the
calling thread's, for the key and the atomic write of one reply (the request body itself is encoded anyway, to be
sent).

    .venv/bin/python bench/bench_cache.py [--tasks 200]
"""

import argparse
import hashlib
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from bench_step_overhead import recorded

from amd.core.paths import cache_dir
from amd.llm.cache import ResponseCache, request_key

IDENTITY = "vllm:bench"  # the model identity of the format used until 2026-11-30


def encoded(body: dict) -> bytes:
    """The body as ChatModel sends it, hence as it is keyed."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def canonical_json(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def old_put(root: Path, body: dict, reply: dict) -> Path:
    """The format used until 2026-11-30: key = sha256 of the canonical key inputs, file = inputs + reply."""
    sampling = {name: body[name] for name in ("temperature", "max_tokens", "seed", "top_p") if name in body}
    key_inputs = {"model": IDENTITY, "messages": body["messages"], "tools": body.get("tools"), "sampling": sampling,
                  "extra_body": None}
    key = hashlib.sha256(canonical_json(key_inputs).encode()).hexdigest()
    old_reply = {name: value for name, value in reply.items() if name != "finish_reason"}
    data = canonical_json({"key_inputs": key_inputs, "reply": old_reply})
    path = root / key[:2] / f"{key}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{key[:8]}-", suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(data)
    os.replace(tmp, path)
    return path


def new_put(cache: ResponseCache, identity: str, sent: bytes, reply: dict) -> Path:
    """Today's format, as ChatModel writes it: `sent` is the request body already encoded for sending."""
    key = request_key(identity, sent)
    cache.put(key, reply)
    return cache.root / key[:2] / f"{key}.json"


def timed(put, *args) -> tuple[float, int]:
    """(CPU ms of the calling thread, bytes of the file written)."""
    started = time.thread_time()
    path = put(*args)
    return 1000 * (time.thread_time() - started), path.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200)
    args = parser.parse_args()
    os.environ["AMD_CACHE_DIR"] = tempfile.mkdtemp(prefix="amd-bench-")
    bodies, identity = recorded([f"multi_turn_base_{i}" for i in range(args.tasks)], cache=True)
    replies = [ResponseCache(cache_dir("responses")).get(request_key(identity, encoded(body))) for body in bodies]
    assert all(reply is not None for reply in replies), "a recorded request was not found under its key"
    old_root, new_cache = Path(tempfile.mkdtemp(prefix="amd-bench-old-")), ResponseCache(cache_dir("fresh"))
    results = {"old": [], "new": []}
    for body, reply in zip(bodies, replies):
        results["old"].append(timed(old_put, old_root, body, reply))
        results["new"].append(timed(new_put, new_cache, identity, encoded(body), reply))
    print(f"response cache over {args.tasks} BFCL tasks, {len(bodies)} replies:")
    for name, label in (("old", "until 2026-11-30 (request + reply)"), ("new", "now (key + reply)")):
        cpu, sizes = zip(*results[name])
        print(f"  {label:34s} {statistics.mean(sizes):8.0f} bytes per reply, {sum(sizes) / 1e6:6.2f} MB in all; "
              f"key + write {statistics.median(cpu):.3f} ms CPU per reply (median)")


if __name__ == "__main__":
    main()
