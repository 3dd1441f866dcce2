"""A memory bank on disk, whatever method wrote it, and vector search over it.

    DIR/manifest.json      method (name, version), writer, embedder, dim, sources (sha256), task ids and groups,
                           types and counts, plus what the method adds (audit, representation, ...)
    DIR/TYPE.jsonl         one entry per line: id, type, source_task_id, source_group, and the method's fields
                           (a bank pooled from several teachers adds source_teacher: amd.memory.pool)
    DIR/TYPE.faiss         faiss IndexFlatIP over the L2-normalized embeddings of each entry's embedded field,
                           row = line, so scores are cosine similarities

A bank is written to DIR.tmp and renamed into place: a crash never leaves a half-written bank at DIR.
"""

import hashlib
import json
import os
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import faiss
import numpy as np

from amd.errors import AmdError
from amd.memory.protocols import NOTHING, SOURCE_FIELDS, Exclusion

BANK_SCHEMA = "amd.memory_bank/2"


@dataclass
class BankContents:
    """What a memory method distilled: entries per type name, the field of each type that is embedded, and
    manifest fields of its own."""

    entries: dict[str, list[dict]]
    embedded: dict[str, str]
    manifest: dict = field(default_factory=dict)


def write_bank(out_dir, manifest: dict, contents: BankContents, vectors: dict[str, np.ndarray]) -> None:
    out_dir = Path(out_dir)
    tmp = out_dir.with_name(out_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for type_name, entries in contents.entries.items():
        with open(tmp / f"{type_name}.jsonl", "w", encoding="utf-8") as handle:
            handle.writelines(json.dumps(entry, ensure_ascii=False) + "\n" for entry in entries)
        faiss.write_index(flat_index(vectors[type_name], manifest["dim"]), str(tmp / f"{type_name}.faiss"))
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


def flat_index(vectors: np.ndarray, dim: int) -> faiss.IndexFlatIP:
    index = faiss.IndexFlatIP(dim)
    if len(vectors):
        index.add(np.ascontiguousarray(vectors, dtype=np.float32))
    return index


@dataclass
class Bank:
    path: Path
    manifest: dict
    manifest_sha256: str
    entries: dict  # type name -> list of entries, in index order
    indexes: dict  # type name -> faiss index over the embedded field
    per_source: dict = field(default_factory=dict)  # type name -> source field -> Counter of its values

    def __post_init__(self):
        self.per_source = {t: {name: Counter(e[name] for e in entries) for name in SOURCE_FIELDS.values()}
                           for t, entries in self.entries.items()}

    def vectors(self, type_name: str) -> np.ndarray:
        index = self.indexes[type_name]
        return index.reconstruct_n(0, index.ntotal) if index.ntotal else np.zeros((0, self.manifest["dim"]))

    def search(self, type_name: str, vector: np.ndarray, k: int, delta: float | None,
               excluded: Exclusion = NOTHING) -> list[tuple[dict, float]]:
        """Top-k entries with cosine ≥ delta (None: any), never one that `excluded` hides."""
        index, entries = self.indexes[type_name], self.entries[type_name]
        wanted = min(k + self.hidden_count(type_name, excluded), index.ntotal)
        if k <= 0 or wanted == 0:
            return []
        scores, rows = index.search(np.asarray(vector, dtype=np.float32).reshape(1, -1), wanted)
        floor = -np.inf if delta is None else delta
        hits = [(entries[row], float(score)) for row, score in zip(rows[0], scores[0])
                if row >= 0 and score >= floor and not excluded.hides(entries[row])]
        return hits[:k]

    def hidden_count(self, type_name: str, excluded: Exclusion) -> int:
        """How many entries of the type `excluded` hides."""
        return self.per_source[type_name][excluded.field][excluded.value] if excluded.field else 0

    def penalties(self, type_name: str, rows) -> np.ndarray:
        """How far each entry of `rows` ranks below its cosine: not at all in a frozen bank (an online one lowers
        entries that failed: amd.memory.online)."""
        return np.zeros(len(rows), dtype=np.float32)

    def restricted(self, source_field: str, allowed: set[str]) -> "Bank":
        """A bank holding only the entries whose `source_field` is one of `allowed` (a cross split's memory side)."""
        return self.filtered(lambda entry: entry[source_field] in allowed)

    def filtered(self, keep) -> "Bank":
        """A bank holding only the entries for which `keep(entry)` is true (same manifest, vectors reused)."""
        rows = {t: [i for i, e in enumerate(entries) if keep(e)] for t, entries in self.entries.items()}
        indexes = {t: flat_index(self.vectors(t)[kept], self.manifest["dim"]) for t, kept in rows.items()}
        entries = {t: [self.entries[t][i] for i in kept] for t, kept in rows.items()}
        return Bank(self.path, self.manifest, self.manifest_sha256, entries, indexes)


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
    entries = {t: _read_entries(path / f"{t}.jsonl") for t in manifest["types"]}
    indexes = {t: _read_index(path / f"{t}.faiss") for t in manifest["types"]}
    for type_name, index in indexes.items():
        if index.ntotal != len(entries[type_name]):
            raise AmdError(f"{path}: {type_name} has {len(entries[type_name])} entries but {index.ntotal} vectors")
    return Bank(path, manifest, hashlib.sha256(manifest_bytes).hexdigest(), entries, indexes)


def _read_index(path: Path):
    if not path.exists():
        raise AmdError(f"{path}: missing from the bank; rebuild it with `amd memory build`")
    return faiss.read_index(str(path))


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
