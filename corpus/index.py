"""FAISS vector index: exact inner product by default, HNSW, IVF or IVF-PQ for millions of chunks.

Vectors are L2-normalised, so inner product is cosine similarity. The index is derived data:
the library keeps the raw vectors (``vectors.f32``) as the source of truth and rebuilds the
index from them when its file is missing or out of step. A crash can therefore never leave a
search that silently returns the wrong chunks.

IVF-PQ (``ivfpq``) is the one kind whose memory does not grow with the vectors' width: each
vector is stored as ``pq_m`` bytes (48 for 384-d, against 1,536 raw), so 10M chunks fit in
about 0.6 GB. It is trained once on a sample and then fed in batches, so building it never
needs more than one batch of float32 rows beside the codes. Its scores are approximate; when
the raw vectors are at hand (:attr:`VectorIndex.exact`, which the library sets), the top
``k x rerank`` candidates are re-scored exactly, which recovers most of what the codes lose. Past
4,096 lists the coarse quantizer is itself an HNSW graph, because assigning millions of
vectors to tens of thousands of centroids by brute force is most of the build time otherwise.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np

__all__ = ["APPROXIMATE_MIN_ROWS", "IndexKind", "VectorIndex"]

IndexKind = Literal["flat", "hnsw", "ivf", "ivfpq"]

# Below this many rows an IVF-PQ index is exact flat search instead: too few rows to train
# 256 codes per sub-quantizer well, and nothing worth saving in memory.
APPROXIMATE_MIN_ROWS = 10_000
_ADD_BATCH = 65_536  # rows encoded at once: bounds the float32 copy beside the codes
_HNSW_QUANTIZER_FROM = 4_096  # lists above which the coarse quantizer is an HNSW graph


def _faiss() -> Any:
    import faiss

    return faiss


def auto_nlist(n: int) -> int:
    """Inverted lists for ``n`` rows when none is set: 4·√n, between 1 and 65,536."""
    return max(1, min(65_536, int(4 * math.sqrt(max(n, 1)))))


def _pq_m(dim: int, want: int) -> int:
    """The largest sub-quantizer count ≤ ``want`` that divides ``dim`` (PQ needs equal slices)."""
    for m in range(min(want, dim), 0, -1):
        if dim % m == 0:
            return m
    return 1


class VectorIndex:
    """A FAISS index over rows 0..n-1 of a vector matrix.

    ``nlist``, ``pq_m``, ``pq_nbits`` shape an IVF-PQ index when it is built; ``nprobe`` (lists
    visited per query) and ``rerank`` (candidates re-scored exactly per result wanted, 0: off)
    only change searches, so they can differ between the build and later loads.
    """

    def __init__(
        self,
        dim: int,
        kind: IndexKind = "flat",
        *,
        hnsw_m: int = 32,
        ef_search: int = 128,
        nlist: int | None = None,
        nprobe: int = 32,
        pq_m: int = 48,
        pq_nbits: int = 8,
        rerank: int = 4,
    ) -> None:
        self.dim = dim
        self.kind: IndexKind = kind
        self.hnsw_m = hnsw_m
        self.ef_search = ef_search
        self.nlist = nlist
        self.nprobe = nprobe
        self.pq_m = _pq_m(dim, pq_m)
        self.pq_nbits = pq_nbits
        self.rerank = rerank
        self.exact: np.ndarray | None = None  # raw rows for re-scoring IVF-PQ candidates
        self._index: Any = None

    @classmethod
    def from_params(cls, dim: int, kind: IndexKind, params: Mapping[str, int | None] | None) -> VectorIndex:
        """A VectorIndex with the keyword parameters a manifest recorded (unknown ones ignored)."""
        known = {"nlist", "nprobe", "pq_m", "pq_nbits", "rerank", "hnsw_m", "ef_search"}
        chosen = {k: v for k, v in (params or {}).items() if k in known and v is not None}
        return cls(dim, kind, **chosen)

    @property
    def ntotal(self) -> int:
        return 0 if self._index is None else int(self._index.ntotal)

    @property
    def approximate_pending(self) -> bool:
        """True for an IVF-PQ index still held as flat search (too few rows when it was built)."""
        return self.kind == "ivfpq" and self._index is not None and self._ivf() is None

    def needs_rebuild(self, n_rows: int) -> bool:
        """Whether an index built earlier should be rebuilt for ``n_rows`` rows (grown past flat)."""
        return self.approximate_pending and n_rows >= APPROXIMATE_MIN_ROWS

    def _ivf(self) -> Any:
        if self._index is None:
            return None
        try:
            return _faiss().extract_index_ivf(self._index)
        except RuntimeError:
            return None

    def _new(self, n_hint: int, sample: np.ndarray | None) -> Any:
        faiss = _faiss()
        if self.kind == "flat" or (self.kind == "ivfpq" and n_hint < APPROXIMATE_MIN_ROWS):
            return faiss.IndexFlatIP(self.dim)
        if self.kind == "hnsw":
            index = faiss.IndexHNSWFlat(self.dim, self.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = 80
            index.hnsw.efSearch = self.ef_search
            return index
        if self.kind == "ivfpq":
            return self._new_ivfpq(n_hint, sample)
        nlist = auto_nlist(n_hint)
        quantizer = faiss.IndexFlatIP(self.dim)
        index = faiss.IndexIVFFlat(quantizer, self.dim, nlist, faiss.METRIC_INNER_PRODUCT)
        if sample is None or len(sample) < nlist:
            raise ValueError(f"IVF index with {nlist} lists needs at least {nlist} training vectors")
        index.train(sample)
        index.nprobe = min(self.nprobe, nlist)
        return index

    def _new_ivfpq(self, n_hint: int, sample: np.ndarray | None) -> Any:
        faiss = _faiss()
        nlist = self.nlist or auto_nlist(n_hint)
        if sample is not None:
            # A list count set for the full corpus, on a library that is still small: as many
            # lists as the sample trains well (FAISS wants 39 rows a centroid).
            nlist = min(nlist, max(1, len(sample) // 39))
        need = max(nlist, 1 << self.pq_nbits)
        if sample is None or len(sample) < need:
            raise ValueError(
                f"IVF-PQ index with {nlist} lists and {self.pq_nbits}-bit codes needs at least "
                f"{need} training vectors, got {0 if sample is None else len(sample)}"
            )
        # Spherical k-means on a flat index: the centroids, then the graph (if any) over them.
        kmeans = faiss.Kmeans(
            self.dim, nlist, niter=10, spherical=True, seed=1234, max_points_per_centroid=256
        )
        kmeans.train(sample)
        if nlist > _HNSW_QUANTIZER_FROM:
            quantizer = faiss.IndexHNSWFlat(self.dim, 32, faiss.METRIC_INNER_PRODUCT)
            quantizer.hnsw.efConstruction = 40
        else:
            quantizer = faiss.IndexFlatIP(self.dim)
        quantizer.add(kmeans.centroids)
        index = faiss.IndexIVFPQ(
            quantizer, self.dim, nlist, self.pq_m, self.pq_nbits, faiss.METRIC_INNER_PRODUCT
        )
        index.train(sample)  # the quantizer is full already, so this trains the PQ codebooks only
        self._tune(index)
        return index

    def _tune(self, index: Any) -> None:
        """Search-time knobs of an IVF index: lists probed; an HNSW quantizer's beam for adding."""
        faiss = _faiss()
        ivf = faiss.extract_index_ivf(index)
        ivf.nprobe = min(self.nprobe, ivf.nlist)
        quantizer = faiss.downcast_index(ivf.quantizer)
        if isinstance(quantizer, faiss.IndexHNSW):
            # Adding needs each row's nearest list only: a short beam is 4x faster than the wide
            # one a search needs to return nprobe lists (passed per search, see _search_params).
            quantizer.hnsw.efSearch = 16

    def _search_params(self, ivf: Any, selector: Any) -> Any:
        faiss = _faiss()
        quantizer_params = None
        if isinstance(faiss.downcast_index(ivf.quantizer), faiss.IndexHNSW):
            quantizer_params = faiss.SearchParametersHNSW(efSearch=max(2 * ivf.nprobe, 64))
        return faiss.SearchParametersIVF(sel=selector, nprobe=ivf.nprobe, quantizer_params=quantizer_params)

    def train(self, sample: np.ndarray, n_hint: int) -> VectorIndex:
        """Create the index for about ``n_hint`` rows, trained on ``sample``; rows come by :meth:`add`.

        For builds whose rows never sit in memory at once (a 10M-row benchmark, a merge of shards).
        """
        self._index = self._new(n_hint, np.ascontiguousarray(sample, dtype=np.float32))
        return self

    def build(self, vectors: np.ndarray) -> VectorIndex:
        """Index ``vectors`` (an array or a read-only memmap), trained on a sample of them."""
        sample = None
        if self.kind in ("ivf", "ivfpq") and len(vectors):
            n = len(vectors)
            lists = self.nlist if self.kind == "ivfpq" and self.nlist else auto_nlist(n)
            want = (
                max(100_000, 64 * lists)
                if self.kind == "ivf"
                else max(256 * (1 << self.pq_nbits), 64 * lists)
            )
            rng = np.random.default_rng(0)
            rows = np.sort(rng.choice(n, size=min(n, want), replace=False))
            sample = np.ascontiguousarray(vectors[rows], dtype=np.float32)
        self._index = self._new(len(vectors), sample)
        for start in range(0, len(vectors), _ADD_BATCH):
            self._index.add(np.ascontiguousarray(vectors[start : start + _ADD_BATCH], dtype=np.float32))
        return self

    def add(self, vectors: np.ndarray) -> None:
        if self._index is None:
            self.build(vectors)
            return
        for start in range(0, len(vectors), _ADD_BATCH):
            self._index.add(np.ascontiguousarray(vectors[start : start + _ADD_BATCH], dtype=np.float32))

    def search(
        self, query: np.ndarray, k: int, *, allowed: Iterable[int] | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` (scores, row ids) for one query; ``allowed`` restricts the rows searched."""
        if self._index is None or self.ntotal == 0 or k <= 0:
            return np.zeros(0, dtype=np.float32), np.zeros(0, dtype=np.int64)
        faiss = _faiss()
        q = np.ascontiguousarray(query, dtype=np.float32).reshape(1, -1)
        ivf = self._ivf() if self.kind in ("ivf", "ivfpq") else None
        rescore = self.kind == "ivfpq" and ivf is not None and self.exact is not None and self.rerank > 0
        fetch = min(k * self.rerank if rescore else k, self.ntotal)
        params = None
        selector = None
        if allowed is not None:
            ids = np.fromiter(allowed, dtype=np.int64)
            if len(ids) == 0:
                return np.zeros(0, dtype=np.float32), np.zeros(0, dtype=np.int64)
            selector = faiss.IDSelectorBatch(ids)
        if ivf is not None:
            params = self._search_params(ivf, selector)
        elif self.kind == "hnsw" and selector is not None:
            params = faiss.SearchParametersHNSW(sel=selector, efSearch=max(self.ef_search, k))
        elif self.kind == "hnsw":
            self._index.hnsw.efSearch = max(self.ef_search, k)
        elif selector is not None:
            params = faiss.SearchParameters(sel=selector)
        scores, ids = self._index.search(q, fetch, params=params)
        keep = ids[0] >= 0
        scores, rows = scores[0][keep], ids[0][keep].astype(np.int64)
        if rescore and len(rows):
            assert self.exact is not None
            order = np.argsort(rows)  # ascending rows: sequential reads when exact is a memmap
            exact = np.empty(len(rows), dtype=np.float32)
            exact[order] = np.asarray(self.exact[rows[order]], dtype=np.float32) @ q[0]
            best = np.argsort(-exact, kind="stable")[:k]
            scores, rows = exact[best], rows[best]
        return scores, rows

    def save(self, path: Path) -> None:
        """Atomic: write beside, then rename over."""
        tmp = path.with_name(path.name + ".tmp")
        _faiss().write_index(self._index, str(tmp))
        os.replace(tmp, path)

    @classmethod
    def load(
        cls, path: Path, kind: IndexKind, dim: int, params: Mapping[str, int | None] | None = None
    ) -> VectorIndex:
        index = cls.from_params(dim, kind, params)
        index._index = _faiss().read_index(str(path))
        if kind == "hnsw":
            index._index.hnsw.efSearch = index.ef_search
        if index._ivf() is not None:
            index._tune(index._index)
        return index
