"""Vector-index scale benchmark on synthetic 384-d vectors: 10k, 100k and 1M chunks; IVF-PQ at 10M.

For each size: build time, memory, query latency p50/p95 and recall@10 of the approximate
indexes (HNSW, IVF) against exact search (flat inner product), all in one run, plus
paper-qa's ``NumpyVectorStore`` on the same vectors as the baseline (latency ratio).

The vectors are a clustered mixture (1,000 centres plus noise, normalised), like real text
embeddings. I.i.d. Gaussian vectors have no neighbourhood structure, so on them every
approximate index looks worse than it does on real data.

    python benchmarks/scale.py --sizes 10000 100000 1000000 --queries 200 --out bench-out/scale.json

``--ivfpq-rows N`` measures one IVF-PQ index over N rows instead (see ``streaming_ivfpq``):
the rows are generated, indexed and written to disk in blocks, so they never sit in memory
at once (10M float32 rows are 15 GB).

    python benchmarks/scale.py --ivfpq-rows 10000000 --nlist 1024 --pq-m 48 --threads 1 \
        --workdir /tmp/ivfpq --out benchmarks/results/2026-12-03/ivfpq-10m.json

``--shard-corpus FILE`` times a real index build (the default embedder) of the first
``--records`` lines of a JSONL corpus, serial and sharded on each of ``--workers``, and checks
that the indexes are equal (see ``sharded_builds``).

    python benchmarks/scale.py --shard-corpus ../shared/data/corpus/pubmedqa-abstracts.jsonl.gz \
        --records 1000 --workers 2 --out bench-out/shard-build.json
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import mmap
import os
import resource
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import numpy as np
from common import write_report  # benchmarks/common.py: scripts run from this folder

from corpus.index import VectorIndex

DIM = 384


def synthetic(n: int, n_queries: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((1000, DIM)).astype(np.float32)
    out = np.empty((n + n_queries, DIM), dtype=np.float32)
    step = 100_000
    for start in range(0, n + n_queries, step):
        m = min(step, n + n_queries - start)
        picks = rng.integers(0, len(centres), m)
        block = centres[picks] + 0.6 * rng.standard_normal((m, DIM)).astype(np.float32)
        out[start : start + m] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return out[:n], out[n:]


def rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def time_queries(fn: Any, queries: np.ndarray) -> tuple[list[np.ndarray], list[float]]:
    results, latencies = [], []
    for q in queries:
        t0 = time.perf_counter()
        results.append(fn(q))
        latencies.append((time.perf_counter() - t0) * 1000)
    return results, latencies


def pct(values: list[float], p: float) -> float:
    return float(np.percentile(values, p))


def paperqa_baseline(vectors: np.ndarray, queries: np.ndarray) -> dict[str, float]:
    from paperqa.llms import NumpyVectorStore
    from paperqa.types import Text

    class FixedQuery:
        """Stands in for an embedding model: returns the query vector we already have."""

        vector: np.ndarray = queries[0]

        def set_mode(self, mode: object) -> None:
            return None

        async def embed_documents(self, texts: list[str]) -> list[np.ndarray]:
            return [self.vector]

    t0 = time.perf_counter()
    store = NumpyVectorStore()
    texts = [Text.model_construct(text=str(i), name=str(i), embedding=row) for i, row in enumerate(vectors)]
    asyncio.run(store.add_texts_and_embeddings(texts))
    build_s = time.perf_counter() - t0
    model = FixedQuery()

    async def run() -> list[float]:
        lat = []
        for q in queries:
            model.vector = q
            t = time.perf_counter()
            await store.similarity_search("q", 10, model)  # type: ignore[arg-type]
            lat.append((time.perf_counter() - t) * 1000)
        return lat

    lat = asyncio.run(run())
    return {"build_s": round(build_s, 2), "p50_ms": round(pct(lat, 50), 3), "p95_ms": round(pct(lat, 95), 3)}


def like(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Mean and a square root of the covariance of real embeddings (a library's ``vectors.f32``)."""
    real = np.fromfile(path, dtype=np.float32).reshape(-1, DIM).astype(np.float64)
    values, vectors = np.linalg.eigh(np.cov(real, rowvar=False))
    root = vectors * np.sqrt(np.clip(values, 0, None))
    return real.mean(axis=0).astype(np.float32), root.T.astype(np.float32)


def synthetic_blocks(
    n: int,
    seed: int = 0,
    block: int = 100_000,
    first_block: int = 0,
    shape: tuple[np.ndarray, np.ndarray] | None = None,
) -> Iterator[tuple[int, np.ndarray]]:
    """The same kind of clustered rows as :func:`synthetic`, ``block`` at a time, as (first row, rows).

    Block ``b`` has its own seed, so any block can be made again without the ones before it.
    With ``shape`` (from :func:`like`), rows are Gaussian with real embeddings' mean and
    covariance instead: their variance sits in few directions, as real embeddings' does, where
    the clustered rows' noise is spread evenly over all 384 (which no code of 48 bytes can keep).
    """
    centres = np.random.default_rng(seed).standard_normal((1000, DIM)).astype(np.float32)
    for b, start in enumerate(range(0, n, block), start=first_block):
        rng = np.random.default_rng([seed, b])
        m = min(block, n - start)
        if shape is not None:
            rows = rng.standard_normal((m, DIM), dtype=np.float32) @ shape[1]
            rows += shape[0]
            rows /= np.linalg.norm(rows, axis=1, keepdims=True)
            yield start, rows
            continue
        rows = centres[rng.integers(0, len(centres), m)]
        noise = rng.standard_normal((m, DIM), dtype=np.float32)
        noise *= 0.6
        rows += noise  # in place: one block of rows and one of noise is all the memory it takes
        del noise
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        yield start, rows


def rss_parts() -> dict[str, float]:
    """Resident MB by kind: heap and FAISS (anon) against pages of memory-mapped files (file)."""
    parts = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(("RssAnon:", "RssFile:")):
                parts[line.split(":")[0]] = round(int(line.split()[1]) / 1024, 1)
    return parts


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def streaming_ivfpq(args: argparse.Namespace) -> dict[str, Any]:
    """IVF-PQ over ``args.ivfpq_rows`` rows that never sit in memory at once.

    1. k-means and the PQ codebooks are trained on the first ``nlist x train_per_list`` rows
       (the rows are i.i.d., so the first ones are a uniform sample);
    2. the rows are made again block by block; each block is added to the index, appended to a
       raw ``vectors.f32`` on disk (as the library keeps it, for re-scoring), and scored exactly
       against every query, so the exact top-10 over all N rows is known at the end;
    3. the index is written to disk and searched one query at a time at each nprobe and rerank.
    """
    import faiss

    if args.threads:
        faiss.omp_set_num_threads(args.threads)
    n, k = args.ivfpq_rows, 10
    args.workdir.mkdir(parents=True, exist_ok=True)
    raw_path, index_path = args.workdir / "vectors.f32", args.workdir / "ivfpq.index"
    # Queries from the same mixture (same centres), drawn from a block number no row block uses.
    shape = like(args.like) if args.like else None
    queries = next(synthetic_blocks(args.queries, block=args.queries, first_block=10**6, shape=shape))[1]
    report: dict[str, Any] = {
        "rows": n,
        "dim": DIM,
        "distribution": f"gaussian with the mean and covariance of {args.like}" if args.like else "clustered",
        "queries": args.queries,
        "nlist": args.nlist,
        "pq_m": args.pq_m,
        "pq_nbits": 8,
        "faiss_threads": args.threads or faiss.omp_get_max_threads(),
        "cpu_count": os.cpu_count(),
        "load_avg_start": os.getloadavg(),
    }
    started = time.perf_counter()
    want = args.nlist * args.train_per_list
    parts = []
    for _, rows in synthetic_blocks(n, shape=shape):
        parts.append(rows[: want - sum(len(p) for p in parts)])
        if sum(len(p) for p in parts) >= want:
            break
    sample = np.concatenate(parts)
    del parts
    t0 = time.perf_counter()
    index = VectorIndex(DIM, "ivfpq", nlist=args.nlist, pq_m=args.pq_m).train(sample, n)
    report["train_rows"] = len(sample)
    report["train_s"] = round(time.perf_counter() - t0, 1)
    del sample
    print("trained", report["train_s"], "s", flush=True)
    best_scores = np.full((len(queries), k), -np.inf, dtype=np.float32)
    best_ids = np.zeros((len(queries), k), dtype=np.int64)
    add_s = exact_s = 0.0
    with raw_path.open("wb") as raw:
        for start, rows in synthetic_blocks(n, shape=shape):
            t0 = time.perf_counter()
            index.add(rows)
            add_s += time.perf_counter() - t0
            raw.write(rows.data)
            t0 = time.perf_counter()
            scores, top = faiss.knn(queries, rows, k, metric=faiss.METRIC_INNER_PRODUCT)
            cand_scores = np.concatenate([best_scores, scores], axis=1)
            cand_ids = np.concatenate([best_ids, top + start], axis=1)
            keep = np.argsort(-cand_scores, axis=1)[:, :k]
            best_scores = np.take_along_axis(cand_scores, keep, axis=1)
            best_ids = np.take_along_axis(cand_ids, keep, axis=1)
            exact_s += time.perf_counter() - t0
            if (start // 100_000) % 10 == 0:
                print(f"{start + len(rows):,} rows, add {add_s:.0f}s, rss {rss_mb():.0f} MB", flush=True)
    report["add_s"] = round(add_s, 1)
    report["exact_topk_s"] = round(exact_s, 1)
    report["build_s"] = round(report["train_s"] + add_s, 1)
    report["wall_s"] = round(time.perf_counter() - started, 1)
    report["rss_after_build_mb"] = round(rss_mb(), 1)
    report["peak_rss_mb"] = round(peak_rss_mb(), 1)
    index.save(index_path)
    report["index_file_mb"] = round(index_path.stat().st_size / 1e6, 1)
    report["raw_vectors_file_mb"] = round(raw_path.stat().st_size / 1e6, 1)
    report["codes_mb"] = round(n * index.pq_m / 1e6, 1)
    exact = np.memmap(raw_path, dtype=np.float32, mode="r", shape=(n, DIM))
    exact._mmap.madvise(mmap.MADV_RANDOM)  # type: ignore[attr-defined]  # no read-ahead: rows are scattered
    index.exact = exact
    report["rss_before_search"] = rss_parts()
    exact_ids = [set(row.tolist()) for row in best_ids]
    searches = []
    index.rerank = max(args.rerank)
    t0 = time.perf_counter()
    for q in queries:  # the first pass reads the re-scored rows from disk; the timed ones find them cached
        index.search(q, k)
    report["cold_pass_ms_per_query"] = round((time.perf_counter() - t0) * 1000 / len(queries), 2)
    for nprobe in args.nprobe:
        index.nprobe = nprobe
        index._tune(index._index)
        for rerank in args.rerank:
            index.rerank = rerank
            results, lat = time_queries(lambda q: index.search(q, k)[1], queries)
            recall = statistics.mean(
                len(set(r.tolist()) & e) / k for r, e in zip(results, exact_ids, strict=True)
            )
            entry = {
                "nprobe": nprobe,
                "rerank": rerank,
                "p50_ms": round(pct(lat, 50), 3),
                "p95_ms": round(pct(lat, 95), 3),
                "recall@10": round(recall, 4),
            }
            searches.append(entry)
            print(entry, flush=True)
    report["search"] = searches
    report["peak_rss_after_search_mb"] = round(peak_rss_mb(), 1)
    report["rss_after_search"] = rss_parts()
    report["load_avg_end"] = os.getloadavg()
    return report


def sharded_builds(args: argparse.Namespace) -> dict[str, Any]:
    """One serial build and one sharded build per worker count, into fresh folders; then compare.

    Each build loads its embedder (the sharded ones once per worker), and that is counted: it is
    what a user waits for. The serial build's torch uses every core for one batch at a time; a
    worker of N gets cores/N threads.
    """
    import gzip
    import shutil
    import tempfile

    from agent.core.settings import load_settings
    from corpus.build import build_index
    from corpus.shards import build_sharded
    from corpus.store import Library

    settings = load_settings()
    work = Path(tempfile.mkdtemp(prefix="scholarloop-shards-"))
    opener: Any = gzip.open if args.shard_corpus.name.endswith(".gz") else open
    corpus = work / "corpus.jsonl"
    with opener(args.shard_corpus, "rt") as src, corpus.open("w") as out:
        for i, line in enumerate(src):
            if i >= args.records:
                break
            out.write(line)
    report: dict[str, Any] = {
        "corpus": str(args.shard_corpus),
        "records": args.records,
        "embedder": settings.embedding.model,
        "cpu_count": os.cpu_count(),
        "load_avg_start": os.getloadavg(),
        "builds": {},
    }
    roots = {}
    for workers in [1, *args.workers]:
        name = "serial" if workers == 1 else f"sharded-{workers}"
        roots[name] = work / name
        t0 = time.perf_counter()
        if workers == 1:
            built = build_index([corpus], roots[name], settings)
        else:
            built = build_sharded([corpus], roots[name], settings, workers=workers, shard_records=250)
        seconds = time.perf_counter() - t0
        report["builds"][name] = {
            "workers": workers,
            "seconds": round(seconds, 1),
            "documents": built.indexed,
            "chunks": built.chunks,
            "chunks_per_s": round(built.chunks / seconds, 2),
        }
        print(name, report["builds"][name], flush=True)
    serial = Library.open(roots["serial"])
    for name, root in roots.items():
        if name == "serial":
            continue
        other = Library.open(root)
        entry = report["builds"][name]
        entry["speedup_vs_serial"] = round(report["builds"]["serial"]["seconds"] / entry["seconds"], 2)
        entry["same_papers_and_chunks"] = all(
            (root / f).read_bytes() == (roots["serial"] / f).read_bytes()
            for f in ("papers.jsonl", "chunks.jsonl")
        )
        entry["max_vector_diff"] = float(np.abs(other.vectors - serial.vectors).max())
    report["peak_rss_mb"] = round(peak_rss_mb(), 1)  # the serial build and the merges
    report["peak_rss_worker_mb"] = round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)
    report["load_avg_end"] = os.getloadavg()
    shutil.rmtree(work)
    return report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--kinds", nargs="+", default=["flat", "hnsw", "ivf"])
    ap.add_argument("--paperqa-max", type=int, default=1_000_000, help="Largest size run through paper-qa.")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--ivfpq-rows", type=int, help="Measure one IVF-PQ index over this many rows instead.")
    ap.add_argument("--nlist", type=int, default=8192, help="IVF-PQ: inverted lists.")
    ap.add_argument("--pq-m", type=int, default=48, help="IVF-PQ: bytes per vector.")
    ap.add_argument("--train-per-list", type=int, default=20, help="IVF-PQ: k-means sample rows per list.")
    ap.add_argument("--nprobe", type=int, nargs="+", default=[16, 64])
    ap.add_argument("--rerank", type=int, nargs="+", default=[0, 4, 10])
    ap.add_argument("--threads", type=int, help="FAISS threads (default: FAISS's own choice).")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/scholarloop-ivfpq"))
    ap.add_argument(
        "--like", type=Path, help="IVF-PQ: rows shaped like this vectors.f32 (see synthetic_blocks)."
    )
    ap.add_argument("--shard-corpus", type=Path, help="Time serial and sharded builds of this JSONL corpus.")
    ap.add_argument("--records", type=int, default=1000, help="With --shard-corpus: lines indexed.")
    ap.add_argument("--workers", type=int, nargs="+", default=[2], help="With --shard-corpus: worker counts.")
    args = ap.parse_args()
    if args.shard_corpus:
        write_report(sharded_builds(args), args.out)
        return
    if args.ivfpq_rows:
        write_report(streaming_ivfpq(args), args.out)
        return
    report: dict[str, Any] = {"dim": DIM, "queries": args.queries, "cpu_count": os.cpu_count(), "sizes": {}}
    for n in args.sizes:
        vectors, queries = synthetic(n, args.queries)
        row: dict[str, Any] = {}
        exact: list[np.ndarray] = []
        flat_p50 = None
        for kind in args.kinds:
            gc.collect()
            before = rss_mb()
            t0 = time.perf_counter()
            index = VectorIndex(DIM, kind).build(vectors)  # type: ignore[arg-type]
            build_s = time.perf_counter() - t0
            mem = rss_mb() - before
            results, lat = time_queries(lambda q, index=index: index.search(q, 10)[1], queries)
            entry = {
                "build_s": round(build_s, 2),
                "index_mem_mb": round(mem, 1),
                "p50_ms": round(pct(lat, 50), 3),
                "p95_ms": round(pct(lat, 95), 3),
            }
            if kind == "flat":
                exact = results
                flat_p50 = entry["p50_ms"]
                entry["recall@10"] = 1.0
            elif exact:
                entry["recall@10"] = round(
                    statistics.mean(
                        len(set(r.tolist()) & set(e.tolist())) / 10
                        for r, e in zip(results, exact, strict=True)
                    ),
                    4,
                )
            row[kind] = entry
            print(n, kind, entry, flush=True)
            del index
        if n <= args.paperqa_max:
            baseline = paperqa_baseline(vectors, queries)
            if flat_p50:
                baseline["flat_speedup_vs_paperqa"] = round(baseline["p50_ms"] / flat_p50, 1)
            row["paperqa_numpy"] = baseline
            print(n, "paperqa_numpy", baseline, flush=True)
        row["vectors_mb"] = round(vectors.nbytes / 1e6, 1)
        report["sizes"][str(n)] = row
        del vectors
        gc.collect()
    write_report(report, args.out)


if __name__ == "__main__":
    main()
