"""FAISS vector index: exact inner product by default, HNSW or IVF for millions of chunks.

Vectors are L2-normalised, so inner product is cosine similarity. The index is derived data:
the library keeps the raw vectors (``vectors.f32``) as the source of truth and rebuilds the
index from them when its file is missing or out of step. A crash can therefore never leave a
search that silently returns the wrong chunks.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import numpy as np

__all__ = ["IndexKind", "VectorIndex"]

IndexKind = Literal["flat", "hnsw", "ivf"]


def _faiss() -> Any:
    import faiss

    return faiss


class VectorIndex:
    """A FAISS index over rows 0..n-1 of a vector matrix."""

    def __init__(self, dim: int, kind: IndexKind = "flat", *, hnsw_m: int = 32, ef_search: int = 128) -> None:
        self.dim = dim
        self.kind: IndexKind = kind
        self.hnsw_m = hnsw_m
        self.ef_search = ef_search
        self.nprobe = 32
        self._index: Any = None

    @property
    def ntotal(self) -> int:
        return 0 if self._index is None else int(self._index.ntotal)

    def _new(self, n_hint: int, sample: np.ndarray | None) -> Any:
        faiss = _faiss()
        if self.kind == "flat":
            return faiss.IndexFlatIP(self.dim)
        if self.kind == "hnsw":
            index = faiss.IndexHNSWFlat(self.dim, self.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = 80
            index.hnsw.efSearch = self.ef_search
            return index
        nlist = max(1, min(65536, int(4 * math.sqrt(max(n_hint, 1)))))
        quantizer = faiss.IndexFlatIP(self.dim)
        index = faiss.IndexIVFFlat(quantizer, self.dim, nlist, faiss.METRIC_INNER_PRODUCT)
        if sample is None or len(sample) < nlist:
            raise ValueError(f"IVF index with {nlist} lists needs at least {nlist} training vectors")
        index.train(sample)
        index.nprobe = min(self.nprobe, nlist)
        return index

    def build(self, vectors: np.ndarray) -> VectorIndex:
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        sample = None
        if self.kind == "ivf":
            rng = np.random.default_rng(0)
            take = min(len(vectors), max(100_000, 64 * int(4 * math.sqrt(max(len(vectors), 1)))))
            sample = vectors[rng.choice(len(vectors), size=take, replace=False)] if len(vectors) else vectors
        self._index = self._new(len(vectors), sample)
        if len(vectors):
            self._index.add(vectors)
        return self

    def add(self, vectors: np.ndarray) -> None:
        if self._index is None:
            self.build(vectors)
            return
        if len(vectors):
            self._index.add(np.ascontiguousarray(vectors, dtype=np.float32))

    def search(
        self, query: np.ndarray, k: int, *, allowed: Iterable[int] | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` (scores, row ids) for one query; ``allowed`` restricts the rows searched."""
        if self._index is None or self.ntotal == 0 or k <= 0:
            return np.zeros(0, dtype=np.float32), np.zeros(0, dtype=np.int64)
        faiss = _faiss()
        q = np.ascontiguousarray(query, dtype=np.float32).reshape(1, -1)
        params = None
        if allowed is not None:
            ids = np.fromiter(allowed, dtype=np.int64)
            if len(ids) == 0:
                return np.zeros(0, dtype=np.float32), np.zeros(0, dtype=np.int64)
            selector = faiss.IDSelectorBatch(ids)
            if self.kind == "hnsw":
                params = faiss.SearchParametersHNSW(sel=selector, efSearch=max(self.ef_search, k))
            elif self.kind == "ivf":
                params = faiss.SearchParametersIVF(sel=selector, nprobe=self._index.nprobe)
            else:
                params = faiss.SearchParameters(sel=selector)
        elif self.kind == "hnsw":
            self._index.hnsw.efSearch = max(self.ef_search, k)
        scores, ids = self._index.search(q, min(k, self.ntotal), params=params)
        keep = ids[0] >= 0
        return scores[0][keep], ids[0][keep].astype(np.int64)

    def save(self, path: Path) -> None:
        """Atomic: write beside, then rename over."""
        tmp = path.with_name(path.name + ".tmp")
        _faiss().write_index(self._index, str(tmp))
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Path, kind: IndexKind, dim: int) -> VectorIndex:
        index = cls(dim, kind)
        index._index = _faiss().read_index(str(path))
        if kind == "hnsw":
            index._index.hnsw.efSearch = index.ef_search
        if kind == "ivf":
            index._index.nprobe = index.nprobe
        return index
