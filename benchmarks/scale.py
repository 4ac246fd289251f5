"""Vector-index scale benchmark on synthetic 384-d vectors: 10k, 100k and 1M chunks.

For each size: build time, memory, query latency p50/p95 and recall@10 of the approximate
indexes (HNSW, IVF) against exact search (flat inner product), all in one run, plus
paper-qa's ``NumpyVectorStore`` on the same vectors as the baseline (latency ratio).

The vectors are a clustered mixture (1,000 centres plus noise, normalised), like real text
embeddings. I.i.d. Gaussian vectors have no neighbourhood structure, so on them every
approximate index looks worse than it does on real data.

    python benchmarks/scale.py --sizes 10000 100000 1000000 --queries 200 --out bench-out/scale.json
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import resource
import statistics
import time
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--kinds", nargs="+", default=["flat", "hnsw", "ivf"])
    ap.add_argument("--paperqa-max", type=int, default=1_000_000, help="Largest size run through paper-qa.")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
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
