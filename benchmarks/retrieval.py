"""Index build speed and retrieval quality (dense vs BM25 vs hybrid) on the shared data sets.

    python benchmarks/retrieval.py --index /tmp/mixed --embedder minilm \\
        --corpus ../shared/data/corpus/*.jsonl* --sets litqa2 pubmedqa scifact --out bench-out/retrieval.json

Builds the index if it is missing (reporting documents/s, chunks/s, peak memory and size on
disk), then measures paper-level recall@1/5/10 of each question's gold source for the three
methods in one run. Gold: LitQA2 = the key passages carrying the question's DOI; PubMedQA
and SciFact = the ``sources`` doc ids (SciFact: answerable claims only, the claim as query).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import time
from pathlib import Path

from common import write_report  # benchmarks/common.py: scripts run from this folder

from agent.bench.grading import as_list
from agent.core.settings import load_settings
from corpus.build import build_index, iter_sources
from corpus.embeddings import make_embedder
from corpus.search import LocalSearch
from corpus.store import Library

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
SETS = {"litqa2": "litqa2-train.jsonl", "pubmedqa": "pubmedqa-dev.jsonl", "scifact": "scifact-train.jsonl"}


def load_questions(name: str, lib: Library, limit: int | None) -> list[tuple[str, set[str]]]:
    by_doi: dict[str, set[str]] = {}
    for p in lib.papers:
        if p.doi:
            by_doi.setdefault(p.doi.lower(), set()).add(p.doc_id)
    known = {p.doc_id for p in lib.papers}
    out: list[tuple[str, set[str]]] = []
    for line in (DATA / "sets" / SETS[name]).read_text().splitlines():
        row = json.loads(line)
        if row.get("answerable") is False:
            continue
        query = row["question"]
        if name == "scifact":
            query = query.split("Claim:", 1)[-1].strip()
        sources = as_list(row.get("sources"))
        if name == "litqa2":
            gold = set().union(
                *(by_doi.get(s.lower().removeprefix("https://doi.org/"), set()) for s in sources)
            )
        else:
            gold = {s for s in sources if s in known}
        if gold:
            out.append((query, gold))
        if limit and len(out) >= limit:
            break
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", type=Path, required=True)
    ap.add_argument("--corpus", type=Path, nargs="*", default=[])
    ap.add_argument("--embedder", default="minilm")
    ap.add_argument("--chunk-chars", type=int, default=None)
    ap.add_argument("--sets", nargs="+", default=list(SETS))
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()

    overrides: dict[str, object] = {"embedding__model": args.embedder}
    if args.chunk_chars:
        overrides["chunking__chunk_chars"] = args.chunk_chars
    settings = load_settings(**overrides)
    result: dict[str, object] = {"embedder": args.embedder, "index": str(args.index)}
    if args.corpus:
        t0 = time.perf_counter()
        report = build_index(list(iter_sources(args.corpus)), args.index, settings)
        build_s = time.perf_counter() - t0
        if report.indexed:
            result["build"] = {
                "documents": report.indexed,
                "chunks": report.chunks,
                "seconds": round(build_s, 1),
                "documents_per_s": round(report.indexed / build_s, 2),
                "chunks_per_s": round(report.chunks / build_s, 2),
                "failed": len(report.failed),
                "skipped": len(report.skipped),
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            }
    lib = Library.open(args.index)
    result["index_info"] = lib.info()
    searcher = LocalSearch(
        lib, make_embedder(lib.manifest.embedder), hybrid_weight=settings.retrieval.hybrid_weight
    )
    searcher.bm25()
    recall: dict[str, dict[str, dict[str, float]]] = {}
    for name in args.sets:
        questions = load_questions(name, lib, args.limit)
        recall[name] = {}
        for method in ("dense", "bm25", "hybrid"):
            hits = {1: 0, 5: 0, 10: 0}
            latencies = []
            for query, gold in questions:
                t0 = time.perf_counter()
                ranked = [d for d, _ in searcher.search_papers(query, 10, method=method)]  # type: ignore[arg-type]
                latencies.append(time.perf_counter() - t0)
                for k in hits:
                    hits[k] += any(d in gold for d in ranked[:k])
            n = max(len(questions), 1)
            recall[name][method] = {
                "n": len(questions),
                **{f"recall@{k}": round(v / n, 3) for k, v in hits.items()},
                "median_query_ms": round(1000 * statistics.median(latencies), 1) if latencies else 0.0,
            }
            print(name, method, recall[name][method], flush=True)
    result["recall"] = recall
    result["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    write_report(result, args.out)


if __name__ == "__main__":
    main()
