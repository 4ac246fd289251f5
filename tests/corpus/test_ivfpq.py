"""IVF-PQ: recall against exact search, re-scoring from the raw vectors, and its life in a library.

Small synthetic data (clustered, like text embeddings), so each test trains in about a second.
benchmarks/scale.py measures the same index at 10M rows.
"""

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from agent.core.models import Chunk, Paper
from corpus import index as index_module
from corpus.index import VectorIndex
from corpus.store import Library

DIM = 32


def clustered(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((50, DIM)).astype(np.float32)
    rows = centres[rng.integers(0, 50, n)] + 0.5 * rng.standard_normal((n, DIM)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def recall(index: VectorIndex, exact: VectorIndex, queries: np.ndarray, k: int = 10) -> float:
    hits = [
        len(set(index.search(q, k)[1].tolist()) & set(exact.search(q, k)[1].tolist())) / k for q in queries
    ]
    return float(np.mean(hits))


@pytest.fixture(autouse=True)
def small_is_enough(monkeypatch: pytest.MonkeyPatch) -> None:
    """IVF-PQ from 1,000 rows (10,000 in use), so that the tests train on little data."""
    monkeypatch.setattr(index_module, "APPROXIMATE_MIN_ROWS", 1_000)


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    """FAISS's OpenMP threads spin while they wait: on a shared 2-core machine, training with
    two of them beside other busy processes took 30x longer than with one."""
    import faiss

    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    yield
    faiss.omp_set_num_threads(before)


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray]:
    return clustered(4_000), clustered(50, seed=1)


def test_ivfpq_recall_against_exact_search_and_what_rescoring_adds(
    data: tuple[np.ndarray, np.ndarray],
) -> None:
    vectors, queries = data
    flat = VectorIndex(DIM, "flat").build(vectors)
    pq = VectorIndex(DIM, "ivfpq", nlist=32, nprobe=8, pq_m=8, pq_nbits=6, rerank=10).build(vectors)
    assert pq._ivf() is not None and pq.ntotal == len(vectors)
    assert pq.exact is None  # codes only: no raw vectors to re-score with
    codes_only = recall(pq, flat, queries)
    pq.exact = vectors
    rescored = recall(pq, flat, queries)
    assert codes_only >= 0.4  # 6 bytes for 32 floats
    assert rescored >= 0.9 and rescored > codes_only
    scores, rows = pq.search(queries[0], 5)
    np.testing.assert_allclose(scores, vectors[rows] @ queries[0], rtol=1e-5)  # exact scores
    assert list(scores) == sorted(scores, reverse=True)


def test_ivfpq_filters_rows_and_survives_save_and_load(
    data: tuple[np.ndarray, np.ndarray], tmp_path: Path
) -> None:
    vectors, queries = data
    pq = VectorIndex(DIM, "ivfpq", nlist=32, pq_m=8, pq_nbits=6).build(vectors)
    pq.exact = vectors
    _, rows = pq.search(queries[0], 5, allowed=range(100, 400))
    assert len(rows) and all(100 <= r < 400 for r in rows)
    pq.save(tmp_path / "pq.index")
    again = VectorIndex.load(tmp_path / "pq.index", "ivfpq", DIM, {"nprobe": 4, "rerank": 0})
    assert again._ivf().nprobe == 4 and again.rerank == 0 and again.ntotal == len(vectors)
    again.rerank, again.exact = 10, vectors
    assert again.search(vectors[7], 1)[1][0] == 7


def test_an_hnsw_coarse_quantizer_serves_many_lists(
    data: tuple[np.ndarray, np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    import faiss

    vectors, queries = data
    monkeypatch.setattr(index_module, "_HNSW_QUANTIZER_FROM", 16)
    pq = VectorIndex(DIM, "ivfpq", nlist=64, nprobe=16, pq_m=8, pq_nbits=6, rerank=10).build(vectors)
    assert isinstance(faiss.downcast_index(pq._ivf().quantizer), faiss.IndexHNSW)
    pq.exact = vectors
    assert recall(pq, VectorIndex(DIM, "flat").build(vectors), queries) >= 0.9


def test_a_small_ivfpq_index_is_exact_until_it_has_rows_enough(data: tuple[np.ndarray, np.ndarray]) -> None:
    vectors, _ = data
    small = VectorIndex(DIM, "ivfpq").build(vectors[:500])
    assert small.approximate_pending and small._ivf() is None  # flat: nothing to train on
    assert small.search(vectors[3], 1)[1][0] == 3
    assert not small.needs_rebuild(999) and small.needs_rebuild(1_000)


def test_a_library_keeps_its_ivfpq_parameters_and_rebuilds_once_it_has_grown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(index_module, "APPROXIMATE_MIN_ROWS", 2_000)
    vectors = clustered(3_000)
    params = {"nlist": 16, "nprobe": 16, "pq_m": 8, "pq_nbits": 6, "rerank": 10}
    lib = Library.open_or_create(
        tmp_path / "idx", embedder="hash-32", dim=DIM, chunk_chars=400, overlap_chars=0,
        index_kind="ivfpq", index_params=params,
    )  # fmt: skip

    def add(rows: range) -> None:
        papers = [Paper(doc_id=f"d{i}", content_hash=f"h{i}") for i in rows]
        chunks = [Chunk(chunk_id=f"d{i}:0", doc_id=f"d{i}", text="t", char_start=0, char_end=1) for i in rows]
        lib.append(papers, chunks, vectors[rows.start : rows.stop])

    add(range(0, 500))
    assert lib.index().approximate_pending  # 500 rows: exact search
    add(range(500, 3_000))
    index = lib.index()
    assert not index.approximate_pending and index.ntotal == 3_000  # grown: rebuilt as IVF-PQ
    assert index.search(vectors[42], 1)[1][0] == 42  # re-scored with the library's raw vectors
    reopened = Library.open(tmp_path / "idx")
    assert reopened.manifest.index_params == params
    assert reopened.info()["index_params"] == params
    loaded = reopened.index()
    assert loaded._ivf() is not None and loaded.rerank == 10 and loaded.search(vectors[42], 1)[1][0] == 42


def test_more_lists_than_the_rows_can_train_are_cut_to_what_they_can(
    data: tuple[np.ndarray, np.ndarray],
) -> None:
    vectors, _ = data
    pq = VectorIndex(DIM, "ivfpq", nlist=65_536, pq_m=8, pq_nbits=6).build(vectors)
    assert pq._ivf().nlist == len(vectors) // 39
