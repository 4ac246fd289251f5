"""Local search over a library: BM25, dense (FAISS), and their fusion, at chunk and paper level.

Fusion is a weighted sum of min-max-normalised scores over the union of each method's
candidates (``hybrid_weight`` is the dense share). Lexical matches catch gene names and exact
terms that small embedders blur, and dense matches catch paraphrases; the sum keeps both.
Filters (year range, documents to exclude or include) are applied *before* ranking, so an
excluded paper can never appear, however well it matches.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from scipy import sparse

from agent.core.models import ScoredChunk
from corpus.embeddings import Embedder
from corpus.store import Library

__all__ = ["BM25", "Filters", "LocalSearch", "Method", "singular", "tokenize"]

Method = Literal["bm25", "dense", "hybrid"]

_STOP_WORDS = """
a an and are as at be by for from has have in is it its of on or that the this to was were
which with what how does do did can not no than then these those their there into about
after before between during more most other such only also may might will would could
should our we you they he she his her them been being both each over under while whether
"""
_STOP = frozenset(_STOP_WORDS.split())


def tokenize(text: str) -> list[str]:
    return [t for t in re.findall(r"[a-z0-9]+(?:[-'][a-z0-9]+)*", text.lower()) if t not in _STOP]


def singular(term: str) -> str:
    """``term`` without a plural (or third-person) ``s``: "inhibitors" and "inhibitor" match.

    Deliberately light: "viruses" → "virus", "studies" → "study", "cases" → "case", "boxes" →
    "box"; words that end in -ss, -us or -is keep their s.
    """
    if len(term) <= 3 or not term.endswith("s") or term.endswith(("ss", "us", "is")):
        return term
    if term.endswith("ies") and len(term) > 4:
        return term[:-3] + "y"
    if term.endswith("es") and term[:-2].endswith(("ss", "us", "is", "x", "ch", "sh")):
        return term[:-2]
    return term[:-1]


def _idf(n: int, df: Any) -> Any:
    """BM25's IDF for ``df`` of ``n`` chunks: a scalar or an array, as given."""
    return np.log(1.0 + (n - df + 0.5) / (df + 0.5))


class BM25:
    """Okapi BM25 with precomputed per-(doc, term) weights in a sparse CSC matrix."""

    def __init__(self, texts: list[str], k1: float = 1.5, b: float = 0.75) -> None:
        vocab: dict[str, int] = {}
        rows: list[int] = []
        cols: list[int] = []
        tfs: list[float] = []
        lengths = np.zeros(len(texts), dtype=np.float32)
        for i, text in enumerate(texts):
            tokens = tokenize(text)
            lengths[i] = len(tokens)
            for term, tf in Counter(tokens).items():
                rows.append(i)
                cols.append(vocab.setdefault(term, len(vocab)))
                tfs.append(tf)
        self.vocab = vocab
        n = len(texts)
        avgdl = float(lengths.mean()) if n else 1.0
        tf_values = np.asarray(tfs, dtype=np.float32)
        r = np.asarray(rows, dtype=np.int64)
        c = np.asarray(cols, dtype=np.int64)
        df = np.bincount(c, minlength=len(vocab)).astype(np.float32)
        idf = _idf(n, df)
        self.n = n
        self.df = df  # chunks holding each vocabulary term, by column
        self._singular_df: dict[str, float] | None = None
        denom = tf_values + k1 * (1 - b + b * lengths[r] / max(avgdl, 1e-9))
        weights = idf[c] * tf_values * (k1 + 1) / denom
        self.matrix = sparse.csc_matrix((weights, (r, c)), shape=(n, len(vocab)), dtype=np.float32)

    def _idf_of(self, term: str) -> float:
        """IDF of a term's singular form, from the chunks holding any of its forms (the most
        frequent form's count stands in for their union); a form no chunk holds has df 0."""
        if self._singular_df is None:
            by_form: dict[str, float] = {}
            for t, col in self.vocab.items():
                s = singular(t)
                by_form[s] = max(by_form.get(s, 0.0), float(self.df[col]))
            self._singular_df = by_form
        return float(_idf(self.n, self._singular_df.get(term, 0.0)))

    def coverage(self, query: str, text: str) -> float:
        """IDF-weighted share of ``query``'s terms that ``text`` holds, in [0, 1].

        A passage that answers a question holds its rare terms; a passage that only shares its
        topic holds the common ones. Unlike a BM25 score this is comparable across questions (a
        long question does not score higher), so one threshold can serve them all. Plurals match
        their singular. A term the library never saw counts at full weight: no passage holds it.
        """
        terms = {singular(t) for t in tokenize(query)}
        if not terms:
            return 1.0
        held = {singular(t) for t in tokenize(text)}
        weights = {t: self._idf_of(t) for t in terms}
        return sum(w for t, w in weights.items() if t in held) / sum(weights.values())

    def scores(self, query: str) -> np.ndarray:
        cols = [self.vocab[t] for t in set(tokenize(query)) if t in self.vocab]
        if not cols:
            return np.zeros(self.matrix.shape[0], dtype=np.float32)
        return np.asarray(self.matrix[:, cols].sum(axis=1)).ravel()


@dataclass(frozen=True)
class Filters:
    year_min: int | None = None
    year_max: int | None = None
    exclude_doc_ids: Collection[str] = ()
    include_doc_ids: Collection[str] | None = None

    @property
    def active(self) -> bool:
        return bool(
            self.year_min is not None
            or self.year_max is not None
            or self.exclude_doc_ids
            or self.include_doc_ids is not None
        )


def _minmax(values: np.ndarray) -> np.ndarray:
    if values.size == 0:
        return values
    lo, hi = float(values.min()), float(values.max())
    return np.ones_like(values) if hi - lo < 1e-12 else (values - lo) / (hi - lo)


class LocalSearch:
    """Search one library with one embedder (the one its manifest names)."""

    def __init__(self, library: Library, embedder: Embedder, *, hybrid_weight: float = 0.5) -> None:
        self.library = library
        self.embedder = embedder
        self.hybrid_weight = hybrid_weight
        self._bm25: BM25 | None = None
        self._bm25_n = -1

    def bm25(self) -> BM25:
        if self._bm25 is None or self._bm25_n != len(self.library.chunks):
            texts = [f"{self._title(c.doc_id)}\n{c.text}" for c in self.library.chunks]
            self._bm25 = BM25(texts)
            self._bm25_n = len(texts)
        return self._bm25

    def _title(self, doc_id: str) -> str:
        return self.library.paper(doc_id).title or ""

    def allowed_rows(self, filters: Filters) -> np.ndarray | None:
        if not filters.active:
            return None
        lib = self.library
        ok_docs = set()
        excluded = set(filters.exclude_doc_ids)
        included = set(filters.include_doc_ids) if filters.include_doc_ids is not None else None
        for p in lib.papers:
            if p.doc_id in excluded or (included is not None and p.doc_id not in included):
                continue
            if filters.year_min is not None and (p.year is None or p.year < filters.year_min):
                continue
            if filters.year_max is not None and (p.year is None or p.year > filters.year_max):
                continue
            ok_docs.add(p.doc_id)
        return np.array([i for i, c in enumerate(lib.chunks) if c.doc_id in ok_docs], dtype=np.int64)

    def _dense(self, query: str, k: int, allowed: np.ndarray | None) -> dict[int, float]:
        q = self.embedder.embed_query(query)
        scores, ids = self.library.index().search(q, k, allowed=allowed)
        return {int(i): float(s) for i, s in zip(ids, scores, strict=True)}

    def _lexical(self, query: str, k: int, allowed: np.ndarray | None) -> dict[int, float]:
        scores = self.bm25().scores(query)
        if allowed is not None:
            masked = np.full_like(scores, -np.inf)
            masked[allowed] = scores[allowed]
            scores = masked
        k = min(k, int(np.isfinite(scores).sum()))
        if k <= 0:
            return {}
        top = np.argpartition(-scores, k - 1)[:k]
        return {int(i): float(scores[i]) for i in top if scores[i] > 0}

    def search(
        self,
        query: str,
        k: int = 10,
        *,
        method: Method = "hybrid",
        filters: Filters | None = None,
        candidates: int | None = None,
        mmr_lambda: float | None = None,
    ) -> list[ScoredChunk]:
        """Top-``k`` chunks for ``query``."""
        if not self.library.chunks or k <= 0:
            return []
        allowed = self.allowed_rows(filters or Filters())
        if allowed is not None and len(allowed) == 0:
            return []
        pool = candidates or max(50, 5 * k)
        if method == "dense":
            fused = self._dense(query, pool, allowed)
        elif method == "bm25":
            fused = self._lexical(query, pool, allowed)
        else:
            dense = self._dense(query, pool, allowed)
            lexical = self._lexical(query, pool, allowed)
            ids = np.array(sorted(set(dense) | set(lexical)), dtype=np.int64)
            d = _minmax(np.array([dense.get(int(i), min(dense.values(), default=0.0)) for i in ids]))
            b = _minmax(np.array([lexical.get(int(i), 0.0) for i in ids]))
            w = self.hybrid_weight
            fused = {int(i): float(w * di + (1 - w) * bi) for i, di, bi in zip(ids, d, b, strict=True)}
        ranked = sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))
        if mmr_lambda is not None:
            ranked = self._mmr(ranked, k, mmr_lambda)
        chunks = self.library.chunks
        return [ScoredChunk(chunk=chunks[i], score=s, rank=r + 1) for r, (i, s) in enumerate(ranked[:k])]

    def _mmr(self, ranked: list[tuple[int, float]], k: int, lam: float) -> list[tuple[int, float]]:
        """Maximal marginal relevance: trade relevance against similarity to chunks already picked."""
        if not ranked:
            return ranked
        vectors = self.library.vectors
        rel = _minmax(np.array([s for _, s in ranked]))
        picked: list[int] = []
        left = list(range(len(ranked)))
        while left and len(picked) < k:
            best, best_score = left[0], -math.inf
            for j in left:
                sim = max((float(vectors[ranked[j][0]] @ vectors[ranked[p][0]]) for p in picked), default=0.0)
                score = lam * rel[j] - (1 - lam) * sim
                if score > best_score:
                    best, best_score = j, score
            picked.append(best)
            left.remove(best)
        return [ranked[j] for j in picked]

    def search_papers(
        self, query: str, k: int = 10, *, method: Method = "hybrid", filters: Filters | None = None
    ) -> list[tuple[str, float]]:
        """Top-``k`` papers (doc id, score): each paper scores as its best chunk."""
        best: dict[str, float] = {}
        for hit in self.search(query, k=max(50, 10 * k), method=method, filters=filters):
            doc = hit.chunk.doc_id
            best[doc] = max(best.get(doc, -math.inf), hit.score)
        return sorted(best.items(), key=lambda kv: -kv[1])[:k]
