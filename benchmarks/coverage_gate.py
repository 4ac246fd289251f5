"""Does a retrieved chunk hold the question's rare terms? A gate that costs no model call.

    python benchmarks/coverage_gate.py --work /tmp/covidqa \\
        --out benchmarks/results/DATE/coverage-gate.json --png benchmarks/results/DATE/coverage-gate.png

With the source paper withheld, a COVID-QA run still finds passages on the question's topic (the
46 papers share one), and the 1.5B summariser and judge take them for answers. A raw retrieval
score cannot tell (``abstention_gate.py``: the best BM25 score grows with the question's length).
This script measures a normalised one, :meth:`corpus.search.BM25.coverage`: the IDF-weighted share
of the question's terms a chunk holds. For every question of ``sets/covidqa-dev.jsonl``, sources
present and withheld, it replays what a run retrieves before any model is called, round by round
as the rulebook re-searches (the question, then :func:`agent.rules.reformulate`'s queries, up to
``agent.max_requery_rounds``): ``paper_search`` keeps ``paper_k`` papers, ``gather_evidence``
ranks ``top_k`` chunks within the candidates. A question passes the gate when some round offers a
chunk at or above the threshold.

The threshold is chosen by 5-fold cross-validation (on four folds: the highest threshold that
stops at most ``--max-loss`` of the answerable questions; scored on the fifth). The report also
gives the gold-passage hit rate among the chunks read (``summarize_k``) with and without the
gate, since the gate skips uncovered chunks and reads the next covered ones instead.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
from common import (  # benchmarks/common.py
    covidqa_questions,
    covidqa_searcher,
    cv_folds,
    highest_bar,
    replay_arguments,
    require_covidqa,
    write_report,
)

from agent.core.evidence import normalise
from agent.core.settings import load_settings
from agent.rules import reformulate
from corpus.search import Filters, LocalSearch


def replay(searcher: LocalSearch, q: dict[str, Any], exclude: set[str], settings: Any) -> list[list[Any]]:
    """The chunks each search round offers ``gather_evidence``: (doc id, text, coverage)."""
    ctx = SimpleNamespace(searcher=searcher)
    base = Filters(exclude_doc_ids=exclude)
    question, query = q["question"], q["question"]
    tried: list[str] = []
    candidates: set[str] = set()
    bm25 = searcher.bm25()
    rounds = []
    for n in range(settings.agent.max_requery_rounds + 1):
        tried.append(query)
        candidates |= {d for d, _ in searcher.search_papers(query, settings.retrieval.paper_k, filters=base)}
        # the pipeline policy's gather question after a re-search (agent/policy.py)
        asked = question if n == 0 else f"{question} ({query})"
        hits = searcher.search(
            asked,
            k=settings.retrieval.top_k,
            filters=Filters(exclude_doc_ids=exclude, include_doc_ids=set(candidates)),
            mmr_lambda=settings.retrieval.mmr_lambda,
        )
        rounds.append([(h.chunk.doc_id, h.chunk.text, bm25.coverage(question, h.chunk.text)) for h in hits])
        nxt = reformulate(question, tried, ctx)  # type: ignore[arg-type]
        if nxt is None:
            break
        query = nxt
    return rounds


def read_hit(q: dict[str, Any], rounds: list[list[Any]], floor: float, read_k: int) -> bool:
    """Is the reference span in one of the chunks the first round reads, with the gate at ``floor``?"""
    span = normalise(q["ideal"])
    read = [(d, t) for d, t, c in rounds[0] if c >= floor][:read_k]
    return any(d in q["sources"] and span in normalise(t) for d, t in read)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    replay_arguments(ap)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--max-loss", type=float, nargs="+", default=[0.02, 0.05, 0.10])
    args = ap.parse_args()
    require_covidqa()

    settings = load_settings(environ={})
    searcher = covidqa_searcher(args.work)
    qs = covidqa_questions(args.limit)
    t0 = time.perf_counter()
    replays = [
        (q, replay(searcher, q, set(), settings), replay(searcher, q, set(q["sources"]), settings))
        for q in qs
    ]
    seconds = time.perf_counter() - t0
    rows = [
        {
            "id": q["id"],
            "present": round(max((c for r in p for _, _, c in r), default=0.0), 4),
            "withheld": round(max((c for r in w for _, _, c in r), default=0.0), 4),
            "first_round_present": round(max((c for _, _, c in p[0]), default=0.0), 4),
        }
        for q, p, w in replays
    ]

    folds = cv_folds(len(rows), args.folds)
    cv: dict[str, Any] = {}
    for max_loss in args.max_loss:
        per_fold = []
        for i, held in enumerate(folds):
            held_set = set(held)
            t = highest_bar([r["present"] for j, r in enumerate(rows) if j not in held_set], max_loss)
            test = [rows[j] for j in held]
            per_fold.append(
                {
                    "fold": i,
                    "threshold": t,
                    "withheld_stopped": round(statistics.mean(r["withheld"] < t for r in test), 3),
                    "answerable_stopped": round(statistics.mean(r["present"] < t for r in test), 3),
                }
            )
        t_all = highest_bar([r["present"] for r in rows], max_loss)
        read_k = settings.evidence.summarize_k
        cv[str(max_loss)] = {
            "folds": per_fold,
            "withheld_stopped": round(statistics.mean(f["withheld_stopped"] for f in per_fold), 3),
            "answerable_stopped": round(statistics.mean(f["answerable_stopped"] for f in per_fold), 3),
            "threshold_on_all": t_all,
            f"passage_hit@{read_k}_without_gate": round(
                statistics.mean(read_hit(q, p, 0.0, read_k) for q, p, _ in replays), 3
            ),
            f"passage_hit@{read_k}_with_gate": round(
                statistics.mean(read_hit(q, p, t_all, read_k) for q, p, _ in replays), 3
            ),
        }
        print(f"max loss {max_loss}: {cv[str(max_loss)]}", flush=True)

    grid = [round(float(t), 3) for t in np.linspace(0.0, 1.0, 41)]
    curve = [
        {
            "threshold": t,
            "withheld_stopped": round(statistics.mean(r["withheld"] < t for r in rows), 3),
            "answerable_stopped": round(statistics.mean(r["present"] < t for r in rows), 3),
        }
        for t in grid
    ]
    report = {
        "date": time.strftime("%Y-%m-%d"),
        "questions": len(rows),
        "rounds": settings.agent.max_requery_rounds + 1,
        "seconds": round(seconds, 1),
        "medians": {k: statistics.median(r[k] for r in rows) for k in ("present", "withheld")},
        "cv": cv,
        "curve": curve,
        "rows": rows,
    }
    write_report(report, args.out)
    if args.png is not None:
        _plot(report, args.png)


def _plot(report: dict[str, Any], png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 4.2))
    xs = [c["answerable_stopped"] for c in report["curve"]]
    ys = [c["withheld_stopped"] for c in report["curve"]]
    ax.plot(xs, ys, marker=".", label="coverage of the question's terms")
    for loss, cv in report["cv"].items():
        ax.plot(cv["answerable_stopped"], cv["withheld_stopped"], "kD", ms=5)
        ax.annotate(
            f"≤{float(loss):.0%} lost: t={cv['threshold_on_all']:.2f} (held out)",
            (cv["answerable_stopped"], cv["withheld_stopped"]),
            textcoords="offset points",
            xytext=(6, -10),
            fontsize=7,
        )
    ax.set_xlabel("answerable questions stopped (lost)")
    ax.set_ylabel("withheld-source questions stopped (right)")
    ax.set_title(f"Coverage gate, covidqa-dev ({report['questions']} questions)", fontsize=10)
    ax.set_xlim(0, 0.5)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(png, dpi=120)


if __name__ == "__main__":
    main()
