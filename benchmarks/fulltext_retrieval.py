"""Full-text reading: does the passage that answers a question reach the summariser?

    python benchmarks/fulltext_retrieval.py --work /tmp/covidqa --chunk-chars 1000 1800 2600 \\
        --methods hybrid dense --out benchmarks/results/DATE/covidqa-retrieval.json

For each chunk size, indexes ``corpus/covidqa-papers-dev.jsonl.gz`` (46 full-text papers) and
replays what a run does before any model is called: ``paper_search`` keeps the ``paper_k`` best
papers, ``gather_evidence`` ranks chunks within them and reads the first ``summarize_k``. It
reports, over every question of ``sets/covidqa-dev.jsonl``:

* gold-paper recall@1/5/10 (the question's ``sources`` paper among the top papers);
* gold-passage hit@k: the reference answer span (``ideal``) inside one of the first k chunks of
  the gold paper that ``gather_evidence`` would offer; hit@``summarize_k`` is "read".

The design (chunk size, method, MMR) is chosen by 5-fold cross-validation over the questions:
the best configuration on four folds is scored on the fifth, so the figure reported for the
choice is never the one it was chosen on.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

from common import (  # benchmarks/common.py: scripts run from this folder
    DATA,
    covidqa_questions,
    cv_folds,
    write_report,
)

from agent.core.evidence import normalise
from agent.core.settings import load_settings
from corpus.build import build_index
from corpus.embeddings import make_embedder
from corpus.search import Filters, LocalSearch
from corpus.store import Library

HIT_K = (1, 2, 3, 5, 10)


def replay(
    searcher: LocalSearch, q: dict[str, Any], *, paper_k: int, top_k: int, method: str, mmr: float | None
) -> dict[str, Any]:
    """Where the gold paper and the gold passage land in one run's search and gather steps."""
    gold = set(q["sources"])
    papers = [d for d, _ in searcher.search_papers(q["question"], paper_k, method=method)]  # type: ignore[arg-type]
    chunks = searcher.search(
        q["question"],
        k=top_k,
        method=method,  # type: ignore[arg-type]
        filters=Filters(include_doc_ids=set(papers)),
        mmr_lambda=mmr,
    )
    span = normalise(q["ideal"])
    passage_rank = next(
        (i + 1 for i, h in enumerate(chunks) if h.chunk.doc_id in gold and span in normalise(h.chunk.text)),
        None,
    )
    paper_rank = next((i + 1 for i, d in enumerate(papers) if d in gold), None)
    return {"id": q["id"], "paper_rank": paper_rank, "passage_rank": passage_rank}


def rates(rows: list[dict[str, Any]]) -> dict[str, float]:
    n = max(len(rows), 1)
    out = {
        f"paper_recall@{k}": sum(1 for r in rows if r["paper_rank"] and r["paper_rank"] <= k) / n
        for k in (1, 5, 10)
    }
    out |= {
        f"passage_hit@{k}": sum(1 for r in rows if r["passage_rank"] and r["passage_rank"] <= k) / n
        for k in HIT_K
    }
    return {k: round(v, 3) for k, v in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, required=True, help="folder for one index per chunk size")
    ap.add_argument("--chunk-chars", type=int, nargs="+", default=[1800])
    ap.add_argument("--embedder", default="minilm")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--methods", nargs="+", default=["hybrid", "dense", "bm25"])
    ap.add_argument("--mmr", type=float, nargs="*", default=[], help="MMR lambdas to try besides none")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()

    base = load_settings(environ={})
    paper_k, top_k, read_k = base.retrieval.paper_k, base.retrieval.top_k, base.evidence.summarize_k
    qs = covidqa_questions(args.limit)
    per_config: dict[str, list[dict[str, Any]]] = {}
    builds: dict[str, Any] = {}
    for chunk_chars in args.chunk_chars:
        settings = load_settings(
            environ={},
            embedding__model=args.embedder,
            chunking__chunk_chars=chunk_chars,
            chunking__overlap_chars=min(200, chunk_chars // 8),
        )
        root = args.work / f"chunks{chunk_chars}"
        t0 = time.perf_counter()
        report = build_index([DATA / "corpus" / "covidqa-papers-dev.jsonl.gz"], root, settings)
        lib = Library.open(root)
        builds[str(chunk_chars)] = {
            "chunks": len(lib.chunks),
            "build_s": round(time.perf_counter() - t0, 1),
            "newly_indexed": report.indexed,
        }
        searcher = LocalSearch(
            lib, make_embedder(lib.manifest.embedder), hybrid_weight=settings.retrieval.hybrid_weight
        )
        searcher.bm25()
        for method in args.methods:
            for mmr in [None, *args.mmr]:
                name = f"chunks={chunk_chars} method={method} mmr={mmr}"
                t0 = time.perf_counter()
                rows = [replay(searcher, q, paper_k=paper_k, top_k=top_k, method=method, mmr=mmr) for q in qs]
                per_config[name] = rows
                print(name, rates(rows), f"{time.perf_counter() - t0:.1f}s", flush=True)

    # k-fold choice of the configuration by passage hit@summarize_k (what the summariser reads)
    folds = cv_folds(len(qs), args.folds)
    metric = f"passage_hit@{read_k}"
    fold_rows = []
    for i, held in enumerate(folds):
        held_set = set(held)
        train = {
            name: rates([r for j, r in enumerate(rows) if j not in held_set])[metric]
            for name, rows in per_config.items()
        }
        chosen = max(train, key=lambda n: (train[n], n))
        test = rates([per_config[chosen][j] for j in held])[metric]
        fold_rows.append({"fold": i, "chosen": chosen, "train": train[chosen], "held_out": test})
    write_report(
        {
            "date": time.strftime("%Y-%m-%d"),
            "questions": len(qs),
            "paper_k": paper_k,
            "top_k": top_k,
            "summarize_k": read_k,
            "builds": builds,
            "configs": {name: rates(rows) for name, rows in per_config.items()},
            "cv": {
                "metric": metric,
                "folds": fold_rows,
                "held_out_mean": round(statistics.mean(f["held_out"] for f in fold_rows), 3),
            },
        },
        args.out,
    )


if __name__ == "__main__":
    main()
