"""Embedders and the on-disk vector cache."""

import multiprocessing
import time

import numpy as np
import pytest

from amd.core.errors import AmdError
from amd.memory import embed
from amd.memory.embed import Embedder, VectorCache, cache_key, get_embedder


class CountingEmbedder(Embedder):
    """Records the texts it really embeds, call by call, so cache hits and model calls are visible."""

    def __init__(self, spec="count:4"):
        self.spec, self.dim, self.seen, self.calls = spec, 4, [], []

    def _encode(self, texts, progress):
        self.seen.extend(texts)
        self.calls.append(list(texts))
        return np.array([[len(t), 1.0, 0.0, 2.0] for t in texts], dtype=np.float32)


class FailingOnThirdRequest(CountingEmbedder):
    request_size = 2

    def _encode(self, texts, progress):
        if len(self.calls) == 2:
            raise ConnectionError("dropped")
        return super()._encode(texts, progress)


def test_hash_embedder_is_deterministic_normalized_and_word_based():
    vectors = get_embedder("hash:64").embed(["Send a message", "send   a MESSAGE", "buy stock"])
    assert vectors.shape == (3, 64) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    assert np.allclose(vectors[0], vectors[1]) and not np.allclose(vectors[0], vectors[2])


def test_vectors_are_cached_on_disk_by_spec_and_text():
    first = CountingEmbedder()
    a = first.embed(["alpha", "beta", "alpha"])
    assert first.seen == ["alpha", "beta", "alpha"]  # duplicates within one call are not merged
    second = CountingEmbedder()  # a new process would see the same file
    b = second.embed(["beta", "alpha", "gamma"])
    assert second.seen == ["gamma"] and np.allclose(b[0], a[1]) and np.allclose(b[1], a[0])
    other_model = CountingEmbedder("count:other")
    other_model.embed(["alpha"])
    assert other_model.seen == ["alpha"]  # the key includes the embedder spec


def test_missing_texts_go_to_the_model_in_one_call():
    CountingEmbedder().embed(["cached 1", "cached 2"])
    texts = [f"text {i}" for i in range(150)]
    embedder = CountingEmbedder()
    embedder.embed(["cached 1", *texts, "cached 2"], progress=True)
    assert embedder.calls == [texts]


def test_request_sized_calls_are_cached_as_each_returns():
    texts = ["a", "b", "c", "d", "e"]
    with pytest.raises(ConnectionError):
        FailingOnThirdRequest().embed(texts)
    again = CountingEmbedder()
    again.embed(texts)
    assert again.calls == [["e"]]


def test_local_model_encodes_all_missing_texts_at_once_with_its_own_progress_bar():
    calls = []

    class Model:
        def encode(self, texts, **options):
            calls.append((list(texts), options))
            return np.ones((len(texts), 384), dtype=np.float32)

    embedder = embed.LocalMiniLM("all-minilm-l6-v2")
    embedder._model, embedder.cacheable = Model(), False
    embedder.embed([f"text {i}" for i in range(150)], progress=True)
    embedder.embed(["short", "list"], progress=True)
    assert [len(texts) for texts, _ in calls] == [150, 2]
    assert [options["show_progress_bar"] for _, options in calls] == [True, False]


def _write_from_process(path, index, start_at):
    while time.time() < start_at:  # all processes open the fresh file at once: the race seen in CI
        time.sleep(0.001)
    VectorCache(path).put_many({cache_key("p", str(i)): np.full(3, i, dtype=np.float32) for i in range(index, 200, 8)})


def test_cache_is_safe_for_concurrent_processes(tmp_path):
    # Before the lock file, 8 of 30 such rounds failed with "database is locked" (measured, 8 processes).
    with multiprocessing.get_context("spawn").Pool(8) as pool:
        for round_ in range(10):
            path, start_at = tmp_path / f"vectors{round_}.sqlite", time.time() + 0.3
            pool.starmap(_write_from_process, [(path, index, start_at) for index in range(8)])
            found = VectorCache(path).get_many([cache_key("p", str(i)) for i in range(200)], 3)
            assert len(found) == 200 and found[cache_key("p", "137")][0] == 137


def test_openai_embedder_without_key_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    embedder = embed.OpenAIEmbedder("text-embedding-3-small")
    assert embedder.dim == 1536
    with pytest.raises(AmdError, match="needs OPENAI_API_KEY"):
        embedder.embed(["hello"])


@pytest.mark.parametrize("spec", ["hash", "hash:0", "local:all-mpnet", "minilm", "openai:text-embedding-9"])
def test_unknown_embedders_are_rejected(spec):
    with pytest.raises(AmdError, match="unknown"):
        get_embedder(spec)


@pytest.mark.slow
def test_local_minilm_embeds_offline_with_meaningful_similarity():
    embedder = get_embedder("local:all-minilm-l6-v2")
    vectors = embedder.embed(["send a message to a colleague", "message my coworker", "buy shares of a stock"])
    assert vectors.shape == (3, 384)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.2


def test_vectors_of_two_servers_serving_one_model_name_are_cached_apart(monkeypatch):
    """OPENAI_BASE_URL elsewhere: the server is part of the vector cache key, as it is of the chat cache's."""
    from scripted_server import ScriptedServer

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with ScriptedServer(embed=lambda text: [1.0, 0.0]) as first, ScriptedServer(embed=lambda text: [0.0, 1.0]) as second:
        vectors = []
        for server in (first, second, first):
            monkeypatch.setenv("OPENAI_BASE_URL", server.url)
            embedder = embed.OpenAIEmbedder("text-embedding-3-small")
            embedder.dim = 2
            vectors.append(embedder.embed(["the same text"])[0])
        assert [len(s.requests) for s in (first, second)] == [1, 1]  # the third call came from the cache
    assert vectors[0].tolist() == [1.0, 0.0] and vectors[1].tolist() == [0.0, 1.0] == vectors[2].tolist()[::-1]
    monkeypatch.delenv("OPENAI_BASE_URL")
    assert embed.OpenAIEmbedder("text-embedding-3-small").identity == "openai:text-embedding-3-small"


def test_an_embedder_spec_may_name_its_own_endpoint_and_key_variable(monkeypatch):
    """openai:MODEL@URL#key=VAR, as for a chat model: the key from VAR goes to that endpoint, OPENAI_* are not read."""
    from scripted_server import ScriptedServer

    monkeypatch.setenv("OPENAI_API_KEY", "sk-global")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # a port nobody listens on
    monkeypatch.delenv("EMBED_KEY", raising=False)
    with ScriptedServer(embed=lambda text: [0.6, 0.8]) as server:
        spec = f"openai:text-embedding-3-small@{server.url}#key=EMBED_KEY"
        embedder = embed.OpenAIEmbedder(spec.removeprefix("openai:"))
        embedder.dim = 2
        with pytest.raises(AmdError, match="environment variable EMBED_KEY, which is not set"):
            embedder.embed(["text"])
        monkeypatch.setenv("EMBED_KEY", "sk-own")
        assert embedder.embed(["text"])[0].tolist() == pytest.approx([0.6, 0.8])
        assert [r.headers["authorization"] for r in server.requests] == ["Bearer sk-own"]
        assert embedder.identity == f"openai:text-embedding-3-small@{server.url.rstrip('/')}"
