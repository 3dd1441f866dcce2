"""The memory bank on disk, and vector search over it.

    DIR/manifest.json        writer, embedder, dim, sources (sha256), agents, task ids, counts, audit, version
    DIR/workflow.jsonl       entries, one per line; workflow.faiss indexes their `query` (the task instruction)
    DIR/subtask.jsonl        subtask.faiss indexes their `description`
    DIR/function.jsonl       looked up by `name`; function_reasoning.npy holds the `reasoning` vectors, row = line

Indexes are faiss IndexFlatIP over L2-normalized float32 vectors, so scores are cosine similarities. A build writes
DIR.tmp and renames it into place: a crash never leaves a half-written bank at DIR.
"""

import hashlib
import json
import os
import shutil
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import faiss
import numpy as np

import amd
from amd.errors import AmdError
from amd.memory.builders import BuildResult, build_entries, successful
from amd.memory.embed import get_embedder
from amd.memory.render import REPRESENTATIONS, check_representation
from amd.schema import read_trajectories

BANK_SCHEMA = "amd.memory_bank/1"
TYPES = ("workflow", "subtask", "function")
EMBEDDED_FIELD = {"workflow": "query", "subtask": "description", "function": "reasoning"}
RULES_WRITER = "rules"


def sha256_file(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# ---- build -----------------------------------------------------------------------------------------------------

def build_bank(trajectory_paths: list, writer: str, embedder_spec: str, out_dir,
               writer_params: dict | None = None, representation: dict | None = None,
               writer_concurrency: int = 4) -> dict:
    """Distill the successful trajectories of `trajectory_paths` into a bank at `out_dir`; returns the manifest.
    `representation` ({type: prose|code}) is the bank's default rendering; both forms are stored either way."""
    representation = check_representation(representation)
    if writer_concurrency < 1:
        raise AmdError(f"writer concurrency must be at least 1, got {writer_concurrency}")
    embedder = get_embedder(embedder_spec)
    sources, records = [], []
    for path in trajectory_paths:
        file_records = read_trajectories(path)
        sources.append({"path": str(path), "sha256": sha256_file(path), "records": len(file_records),
                        "successful": sum(r["success"] is True for r in file_records)})
        records.extend(file_records)
    used = successful(records)
    result = _distill(used, writer, writer_params or {}, writer_concurrency)
    vectors = {t: embedder.embed([e[EMBEDDED_FIELD[t]] for e in getattr(result, t)], progress=True) for t in TYPES}
    manifest = {
        "schema": BANK_SCHEMA, "amd_version": amd.__version__,
        "writer": _writer_description(writer, writer_params or {}),
        "embedder": embedder.spec, "dim": embedder.dim,
        "representation": {"stored": list(REPRESENTATIONS), "default": representation},
        "sources": sources,
        "agents": _unique([r["agent"] for r in used]),
        "benchmarks": sorted({r["benchmark"] for r in records}),
        "task_ids": sorted({r["task_id"] for r in records}),
        "successful_task_ids": sorted(r["task_id"] for r in used),
        "counts": {t: len(getattr(result, t)) for t in TYPES},
        "audit": {key: result.audit.get(key, 0) for key in
                  ("insights_repaired", "insights_rejected", "values_replaced", "writer_fallbacks")},
    }
    _write_atomically(Path(out_dir), manifest, result, vectors)
    return manifest


def _distill(records: list[dict], writer: str, writer_params: dict, concurrency: int) -> BuildResult:
    """Entries of every record, in record order; a model writer serves `concurrency` records at once."""
    from concurrent.futures import ThreadPoolExecutor

    from tqdm import tqdm

    progress = {"desc": "distilling", "unit": "task", "file": sys.stderr, "disable": len(records) < 2,
                "total": len(records)}
    if writer == RULES_WRITER:
        return _merge(build_entries(record) for record in tqdm(records, **progress))
    from amd.llm import open_model

    with open_model(writer, writer_params) as model, ThreadPoolExecutor(concurrency) as pool:
        chat = model.chat  # thread-safe
        return _merge(tqdm(pool.map(lambda record: build_entries(record, chat), records), **progress))


def _merge(results) -> BuildResult:
    merged = BuildResult()
    for result in results:
        for memory_type in TYPES:
            getattr(merged, memory_type).extend(getattr(result, memory_type))
        merged.audit.update(result.audit)
    return merged


def _writer_description(writer: str, params: dict) -> dict:
    if writer == RULES_WRITER:
        return {"spec": RULES_WRITER, "kind": "rules (deterministic, model-free templates)"}
    return {"spec": writer, "kind": "model", "params": params}


def _unique(items: list[dict]) -> list[dict]:
    return [json.loads(text) for text in dict.fromkeys(json.dumps(i, sort_keys=True) for i in items)]


def _write_atomically(out_dir: Path, manifest: dict, result: BuildResult, vectors: dict) -> None:
    tmp = out_dir.with_name(out_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for memory_type in TYPES:
        with open(tmp / f"{memory_type}.jsonl", "w", encoding="utf-8") as handle:
            handle.writelines(json.dumps(entry, ensure_ascii=False) + "\n" for entry in getattr(result, memory_type))
    for memory_type in ("workflow", "subtask"):
        faiss.write_index(_flat_index(vectors[memory_type], manifest["dim"]), str(tmp / f"{memory_type}.faiss"))
    np.save(tmp / "function_reasoning.npy", vectors["function"])
    (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    for path in tmp.iterdir():
        with open(path, "rb") as handle:
            os.fsync(handle.fileno())
    old = out_dir.with_name(out_dir.name + ".old")
    if out_dir.exists():
        shutil.rmtree(old, ignore_errors=True)
        os.replace(out_dir, old)
    os.replace(tmp, out_dir)
    shutil.rmtree(old, ignore_errors=True)


def _flat_index(vectors: np.ndarray, dim: int) -> faiss.IndexFlatIP:
    index = faiss.IndexFlatIP(dim)
    if len(vectors):
        index.add(np.ascontiguousarray(vectors, dtype=np.float32))
    return index


# ---- load and search ----------------------------------------------------------------------------------------------

@dataclass
class Bank:
    path: Path
    manifest: dict
    manifest_sha256: str
    entries: dict  # type -> list of entries, in index order
    indexes: dict  # "workflow"/"subtask" -> faiss index
    reasoning: np.ndarray  # function reasoning vectors, row = function entry
    by_name: dict = field(default_factory=dict)  # function name -> row numbers
    per_source: dict = field(default_factory=dict)  # type -> Counter of source_task_id

    def __post_init__(self):
        self.per_source = {t: Counter(e["source_task_id"] for e in self.entries[t]) for t in TYPES}
        for row, entry in enumerate(self.entries["function"]):
            self.by_name.setdefault(entry["name"], []).append(row)
            if entry.get("app"):
                self.by_name.setdefault(f"{entry['app']}.{entry['name']}", []).append(row)

    def search(self, memory_type: str, vector: np.ndarray, k: int, delta: float,
               exclude_source: str | None = None) -> list[tuple[dict, float]]:
        """Top-k entries with cosine ≥ delta, never one whose source_task_id is `exclude_source`."""
        index, entries = self.indexes[memory_type], self.entries[memory_type]
        own = self.per_source[memory_type][exclude_source] if exclude_source else 0
        wanted = min(k + own, index.ntotal)
        if k <= 0 or wanted == 0:
            return []
        scores, rows = index.search(np.asarray(vector, dtype=np.float32).reshape(1, -1), wanted)
        hits = [(entries[row], float(score)) for row, score in zip(rows[0], scores[0])
                if row >= 0 and score >= delta and entries[row]["source_task_id"] != exclude_source]
        return hits[:k]

    def restricted(self, allowed_sources: set[str]) -> "Bank":
        """A bank holding only the entries distilled from `allowed_sources` (cross-split memory side)."""
        keep = {t: [i for i, e in enumerate(self.entries[t]) if e["source_task_id"] in allowed_sources]
                for t in TYPES}
        indexes = {t: _flat_index(self.indexes[t].reconstruct_n(0, self.indexes[t].ntotal)[keep[t]]
                                  if self.indexes[t].ntotal else np.zeros((0, self.manifest["dim"])),
                                  self.manifest["dim"]) for t in ("workflow", "subtask")}
        return Bank(self.path, self.manifest, self.manifest_sha256,
                    {t: [self.entries[t][i] for i in keep[t]] for t in TYPES}, indexes,
                    self.reasoning[keep["function"]])


def load_bank(bank_dir) -> Bank:
    # One query at a time: FAISS's OpenMP threads cost far more than they save (32 ms vs 1 ms per top-1 search
    # over 10,000 vectors on 2 cores).
    faiss.omp_set_num_threads(1)
    path = Path(bank_dir)
    manifest_path = path / "manifest.json"
    if not manifest_path.exists():
        raise AmdError(f"{path}: not a memory bank (no manifest.json); build one with `amd memory build`")
    manifest_bytes = manifest_path.read_bytes()
    manifest = _parse_json(manifest_bytes.decode("utf-8", "replace"), manifest_path, 1)
    if manifest.get("schema") != BANK_SCHEMA:
        raise AmdError(f"{path}: bank schema {manifest.get('schema')!r}, expected {BANK_SCHEMA!r}; rebuild it")
    entries = {t: _read_entries(path / f"{t}.jsonl") for t in TYPES}
    indexes = {t: faiss.read_index(str(path / f"{t}.faiss")) for t in ("workflow", "subtask")}
    reasoning = np.load(path / "function_reasoning.npy")
    for memory_type, count in [("workflow", indexes["workflow"].ntotal), ("subtask", indexes["subtask"].ntotal),
                               ("function", len(reasoning))]:
        if count != len(entries[memory_type]):
            raise AmdError(f"{path}: {memory_type} has {len(entries[memory_type])} entries but {count} vectors")
    return Bank(path, manifest, hashlib.sha256(manifest_bytes).hexdigest(), entries, indexes, reasoning)


def _read_entries(path: Path) -> list[dict]:
    if not path.exists():
        raise AmdError(f"{path}: missing from the bank; rebuild it with `amd memory build`")
    lines = path.read_text(encoding="utf-8").splitlines()
    return [_parse_json(line, path, number) for number, line in enumerate(lines, start=1) if line.strip()]


def _parse_json(text: str, path: Path, line: int):
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise AmdError(f"{path}:{line}: corrupt bank file ({error.msg}); rebuild it with `amd memory build`") from None
