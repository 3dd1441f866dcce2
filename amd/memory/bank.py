"""A memory bank on disk, whatever method wrote it, and vector search over it.

    DIR/manifest.json      method (name, version), writer, embedder, dim, sources (sha256), task ids and groups,
                           types and counts, the sha256 of each file below (`files`), plus what the method adds
                           (audit, representation, ...)
    DIR/TYPE.jsonl         one entry per line: id, type, source_task_id, source_group, and the method's fields
                           (a bank pooled from several teachers adds source_teacher: amd.memory.pool)
    DIR/TYPE.faiss         faiss IndexFlatIP over the L2-normalized embeddings of each entry's embedded field,
                           row = line, so scores are cosine similarities

A bank is written to DIR.tmp and renamed into place: a crash never leaves a half-written bank at DIR. Opening it
checks every file against its checksum and every index against the manifest's dimension, so a changed, damaged or
swapped file is refused, never read as memory. A bank built before the checksums is opened with a warning. A bank
of an older schema version is read as the current one (amd.memory.bank_schema: the manifest and entries as types,
and their migrations), its files untouched.
"""

import hashlib
import json
import logging
import os
import shutil
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import faiss
import numpy as np

from amd.core.errors import AmdError
from amd.core.files import sha256_file
from amd.memory.bank_schema import BankManifest, check_version, upgrade, version_of
from amd.memory.protocols import NOTHING, SOURCE_FIELDS, Exclusion

log = logging.getLogger(__name__)


@dataclass
class BankContents:
    """What a memory method distilled: entries per type name, the field of each type that is embedded, and
    manifest fields of its own."""

    entries: dict[str, list[dict]]
    embedded: dict[str, str]
    manifest: dict = field(default_factory=dict)


def is_bank(folder) -> bool:
    """Whether `folder` is a memory bank: it holds a bank's manifest (any version of the bank schema)."""
    try:
        manifest = json.loads((Path(folder) / "manifest.json").read_bytes())
    except (OSError, ValueError):
        return False
    return version_of(_schema(manifest)) is not None


def check_bank_out(out_dir) -> None:
    """Refuse, in one line, a bank's --out that is not a bank's to replace: writing a bank replaces its folder whole,
    so it goes only where nothing is, or over a bank (a folder with a bank's manifest), never over the current
    folder."""
    real = Path(os.path.realpath(out_dir))
    if Path.cwd().is_relative_to(real):
        raise AmdError(f"--out {str(out_dir)!r} is the current folder or holds it; a bank is written as a folder of "
                       "its own: name a new one")
    if real.exists() and not is_bank(real):
        raise AmdError(f"--out {out_dir}: exists and is not a memory bank (no bank manifest.json); writing a bank "
                       "replaces its folder whole, so it goes to a new folder or over a bank: choose another --out")


def write_bank(out_dir, manifest: dict, contents: BankContents, vectors: dict[str, np.ndarray]) -> None:
    out_dir = Path(os.path.realpath(out_dir))
    check_bank_out(out_dir)
    tmp = out_dir.with_name(out_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for type_name, entries in contents.entries.items():
        with open(tmp / f"{type_name}.jsonl", "w", encoding="utf-8") as handle:
            handle.writelines(json.dumps(entry, ensure_ascii=False) + "\n" for entry in entries)
        faiss.write_index(flat_index(vectors[type_name], manifest["dim"]), str(tmp / f"{type_name}.faiss"))
    manifest["files"] = {path.name: sha256_file(path) for path in sorted(tmp.iterdir())}
    (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    _put_in_place(tmp, out_dir)


def copy_bank(bank: "Bank", out_dir) -> None:
    """An opened bank's manifest and files (nothing else of its folder), copied to `out_dir` (replaced as write_bank
    replaces it)."""
    out_dir = Path(out_dir)
    tmp = out_dir.with_name(out_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for name in ["manifest.json", *_bank_files(bank.path, bank.manifest)]:
        shutil.copyfile(bank.path / name, tmp / name)
    _put_in_place(tmp, out_dir)


def _put_in_place(tmp: Path, out_dir: Path) -> None:
    """The written folder `tmp`, made durable, renamed to `out_dir` (whose old copy goes)."""
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
    """An opened bank: its manifest, entries per type name (in index order) and their vectors; `search` finds the
    entries nearest a query that a task may see."""

    path: Path
    manifest: BankManifest  # as the current schema reads it, whatever version wrote it
    manifest_sha256: str  # of the manifest's bytes on disk
    entries: dict  # type name -> list of entries (each a BankEntry and the method's fields), in index order
    indexes: dict  # type name -> faiss index over the embedded field
    per_source: dict = field(default_factory=dict)  # type name -> source field -> Counter of its values

    def __post_init__(self):
        self.per_source = {t: {name: Counter(e[name] for e in entries) for name in SOURCE_FIELDS.values()}
                           for t, entries in self.entries.items()}

    def method_field(self, name: str) -> Any:
        """A field the bank's method added to its manifest (BankContents.manifest); None where it has none."""
        return cast(dict[str, Any], self.manifest).get(name)

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

    def regrouped(self, task_groups: Mapping[str, str]) -> "Bank":
        """The same bank with each source task's group as `task_groups` gives it (the benchmark's exclusion groups
        now, amd.benchmarks.duplicates), so a bank built before two tasks were found duplicates still keeps them
        apart; a task `task_groups` does not name keeps the group it was built with."""
        def group(task_id: str, built: str) -> str:
            return task_groups.get(task_id, built)

        entries = {t: [{**e, "source_group": group(e["source_task_id"], e["source_group"])} for e in type_entries]
                   for t, type_entries in self.entries.items()}
        manifest = self.manifest.copy()
        manifest["task_groups"] = {task: group(task, built) for task, built in self.manifest["task_groups"].items()}
        return Bank(self.path, manifest, self.manifest_sha256, entries, self.indexes)

    def filtered(self, keep) -> "Bank":
        """A bank holding only the entries for which `keep(entry)` is true (same manifest, vectors reused)."""
        rows = {t: [i for i, e in enumerate(entries) if keep(e)] for t, entries in self.entries.items()}
        indexes = {t: flat_index(self.vectors(t)[kept], self.manifest["dim"]) for t, kept in rows.items()}
        entries = {t: [self.entries[t][i] for i in kept] for t, kept in rows.items()}
        return Bank(self.path, self.manifest, self.manifest_sha256, entries, indexes)


SNAPSHOT_TRIES = 3  # reads of a bank that a rebuild replaced mid-read before giving up


class _Replaced(Exception):
    """The folder read was replaced by a rebuild while it was read: read the new one from the start."""


def load_bank(bank_dir) -> Bank:
    """The bank at `bank_dir`, every file verified against the manifest's checksum and parsed from the very bytes
    verified, all read from one folder (opened once): a rebuild renaming a new bank into place mid-read can never
    mix two banks; the new bank is read again from its start."""
    # One query at a time: FAISS's OpenMP threads cost far more than they save (32 ms vs 1 ms per top-1 search
    # over 10,000 vectors on 2 cores).
    faiss.omp_set_num_threads(1)
    path = Path(bank_dir)
    for _ in range(SNAPSHOT_TRIES):
        try:
            return _load_snapshot(path)
        except _Replaced:
            continue
    raise AmdError(f"{path}: replaced by a rebuild while being read, {SNAPSHOT_TRIES} times in a row; the bank is "
                   "fine: run again once the build writing it has finished")


def _load_snapshot(path: Path) -> Bank:
    try:
        folder = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except (FileNotFoundError, NotADirectoryError):
        raise AmdError(f"{path}: not a memory bank (no manifest.json); build one with `amd memory build`") from None
    try:
        return _read_bank(path, folder)
    except (AmdError, OSError):
        if _replaced(path, folder):
            raise _Replaced from None
        raise
    finally:
        os.close(folder)


def _replaced(path: Path, folder: int) -> bool:
    """Whether `path` names another folder now than the one opened as `folder`."""
    try:
        now = os.stat(path)
    except OSError:
        return True
    opened = os.fstat(folder)
    return (now.st_dev, now.st_ino) != (opened.st_dev, opened.st_ino)


def _read_bank(path: Path, folder: int) -> Bank:
    def read(name: str) -> bytes | None:
        try:
            with open(name, "rb", opener=lambda file, flags: os.open(file, flags, dir_fd=folder)) as handle:
                return handle.read()
        except FileNotFoundError:
            return None

    manifest_bytes = read("manifest.json")
    if manifest_bytes is None:
        raise AmdError(f"{path}: not a memory bank (no manifest.json); build one with `amd memory build`")
    manifest = _parse_json(manifest_bytes, path / "manifest.json", 1, None)
    check_version(manifest, str(path))
    files = {}
    for name in _bank_files(path, manifest):
        data = read(name)
        if data is None:
            raise AmdError(f"{path / name}: missing from the bank; {rebuild_hint(path, manifest)}")
        _check_file(path / name, data, manifest)
        files[name] = data
    entries = {t: _parse_entries(files[f"{t}.jsonl"], path / f"{t}.jsonl", manifest) for t in manifest["types"]}
    indexes = {t: _parse_index(files[f"{t}.faiss"], path / f"{t}.faiss", manifest) for t in manifest["types"]}
    for type_name, index in indexes.items():
        if index.ntotal != len(entries[type_name]):
            raise AmdError(f"{path}: {type_name} has {len(entries[type_name])} entries but {index.ntotal} vectors; "
                           f"{rebuild_hint(path, manifest)}")
    return Bank(path, upgrade(manifest, entries), hashlib.sha256(manifest_bytes).hexdigest(), entries, indexes)


def rebuild_hint(path: Path, manifest: Mapping[str, Any] | None) -> str:
    """How to make the bank at `path` again: the command that built it, as far as its manifest tells."""
    if not manifest or "sources" not in manifest:
        return "rebuild it with `amd memory build`, or delete it and rerun snakemake"
    if "pool" in manifest:
        members = manifest["pool"]["members"]
        return (f"rebuild it: `amd memory pool --banks {' '.join(m['bank'] for m in members.values())} --teachers "
                f"{' '.join(members)} --out {path}`, or delete it and rerun snakemake")
    sources = " ".join(source["path"] for source in manifest["sources"])
    return (f"rebuild it: `amd memory build --trajectories {sources} --method {manifest['method']['name']} --writer "
            f"{manifest['writer']['spec']} --embedder {manifest['embedder']} --out {path}` (with its build options), "
            "or delete it and rerun snakemake")


def _schema(manifest) -> object:
    return manifest.get("schema") if isinstance(manifest, dict) else None


def _bank_files(path: Path, manifest: Mapping[str, Any]) -> list[str]:
    """The files a bank holds besides its manifest: those its types need and those its checksums name."""
    needed = {f"{t}.{ext}" for t in manifest["types"] for ext in ("jsonl", "faiss")}
    if manifest.get("files") is None:
        log.warning("%s: built before banks carried checksums, so its files are not verified; %s", path,
                    rebuild_hint(path, manifest))
        return sorted(needed)
    return sorted(needed | set(manifest["files"]))


def _check_file(file: Path, data: bytes, manifest: dict) -> None:
    """The file holds what it held when the bank was written (the manifest's sha256 of it), where recorded."""
    expected = manifest.get("files")
    if expected is not None and (file.name not in expected or hashlib.sha256(data).hexdigest() != expected[file.name]):
        raise AmdError(f"{file}: not the file this bank was built with (its sha256 differs from the manifest's: "
                       f"changed or damaged since); {rebuild_hint(file.parent, manifest)}")


def _parse_index(data: bytes, path: Path, manifest: dict):
    try:
        index = faiss.deserialize_index(np.frombuffer(data, dtype=np.uint8))
    except RuntimeError as error:
        reason = str(error).strip().splitlines()[-1][:200] if str(error).strip() else "unreadable"
        raise AmdError(f"{path}: not a readable FAISS index ({reason}); {rebuild_hint(path.parent, manifest)}") from None
    if index.d != manifest["dim"]:
        raise AmdError(f"{path}: {index.d}-dimensional vectors in a bank of {manifest['dim']} dimensions "
                       f"({manifest['embedder']}); {rebuild_hint(path.parent, manifest)}")
    return index


def _parse_entries(data: bytes, path: Path, manifest: dict) -> list[dict]:
    return [_parse_json(raw, path, number, manifest)
            for number, raw in enumerate(data.split(b"\n"), start=1) if raw.strip()]


def _parse_json(raw: bytes, path: Path, line: int, manifest: dict | None):
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        why = error.msg if isinstance(error, json.JSONDecodeError) else "not UTF-8"
        raise AmdError(f"{path}:{line}: corrupt bank file ({why}); {rebuild_hint(path.parent, manifest)}") from None
