"""Can retrieval alone tell that the corpus holds no answer, before any model is called?

    python benchmarks/abstention_gate.py --work /tmp/covidqa \\
        --out benchmarks/results/DATE/abstention-gate.json --png benchmarks/results/DATE/abstention-gate.png

An unanswerable free-form question used to cost about twice an answered one: the summariser
scores loosely related passages 5 or more, the gate passes, and two drafts fail the citation
check before the run gives up. A gate that looks at retrieval scores costs nothing. This
script measures whether such a gate separates the two cases on every question of
``sets/covidqa-dev.jsonl`` over ``corpus/covidqa-papers-dev.jsonl.gz``:

* *answerable*: the run as it is (the question's source paper is in the corpus);
* *withheld*: the same question with its source paper excluded, as ``bench --withhold-sources``
  does, where the right outcome is to abstain.

For each it records the best dense (cosine) score and the best raw BM25 score among the chunks
``gather_evidence`` would consider. A threshold on either is a gate; its trade-off is the share of
withheld questions stopped against the share of answerable ones wrongly stopped. The threshold is
chosen by 5-fold cross-validation (on four folds: the highest share stopped among withheld
questions while at most ``--max-loss`` of answerable ones are stopped; scored on the fifth).
With ``--png`` the curve is drawn.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
from common import (  # benchmarks/common.py
    covidqa_questions,
    covidqa_searcher,
    cv_folds,
    highest_bar,
    write_report,
)

from corpus.search import Filters, LocalSearch

FEATURES = ("dense", "bm25")


def features(searcher: LocalSearch, question: str, exclude: set[str]) -> dict[str, float]:
    """The best dense and BM25 score over the chunks a run could read."""
    allowed = searcher.allowed_rows(Filters(exclude_doc_ids=exclude))
    dense = searcher._dense(question, 1, allowed)
    lexical = searcher._lexical(question, 1, allowed)
    return {"dense": max(dense.values(), default=0.0), "bm25": max(lexical.values(), default=0.0)}


def trade_off(rows: list[dict[str, Any]], feature: str, t: float) -> tuple[float, float]:
    """(withheld stopped, answerable stopped) for the gate "stop when the score is below t"."""
    stopped_withheld = statistics.mean(r["withheld"][feature] < t for r in rows)
    stopped_answerable = statistics.mean(r["answerable"][feature] < t for r in rows)
    return stopped_withheld, stopped_answerable


def choose(rows: list[dict[str, Any]], feature: str, max_loss: float) -> float:
    """The highest threshold that stops at most ``max_loss`` of the answerable questions."""
    return highest_bar([r["answerable"][feature] for r in rows], max_loss)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, required=True, help="folder for the index (reused if built)")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--max-loss", type=float, nargs="+", default=[0.02, 0.05, 0.10])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--png", type=Path, default=None)
    args = ap.parse_args()

    searcher = covidqa_searcher(args.work)
    qs = covidqa_questions(args.limit)
    t0 = time.perf_counter()
    rows = [
        {
            "id": q["id"],
            "answerable": features(searcher, q["question"], set()),
            "withheld": features(searcher, q["question"], set(q["sources"])),
        }
        for q in qs
    ]
    seconds = time.perf_counter() - t0

    folds = cv_folds(len(rows), args.folds)
    cv: dict[str, Any] = {}
    for feature in FEATURES:
        for max_loss in args.max_loss:
            per_fold = []
            for i, held in enumerate(folds):
                held_set = set(held)
                train = [r for j, r in enumerate(rows) if j not in held_set]
                t = choose(train, feature, max_loss)
                stopped_w, stopped_a = trade_off([rows[j] for j in held], feature, t)
                per_fold.append(
                    {
                        "fold": i,
                        "threshold": round(t, 4),
                        "withheld_stopped": round(stopped_w, 3),
                        "answerable_stopped": round(stopped_a, 3),
                    }
                )
            cv[f"{feature}, answerable loss <= {max_loss}"] = {
                "folds": per_fold,
                "withheld_stopped": round(statistics.mean(f["withheld_stopped"] for f in per_fold), 3),
                "answerable_stopped": round(statistics.mean(f["answerable_stopped"] for f in per_fold), 3),
                "threshold_on_all": round(choose(rows, feature, max_loss), 4),
            }
    curves = {}
    for feature in FEATURES:
        grid = np.quantile(
            [r["answerable"][feature] for r in rows] + [r["withheld"][feature] for r in rows],
            np.linspace(0, 1, 41),
        )
        curves[feature] = [
            (round(float(t), 4), *map(lambda v: round(v, 3), trade_off(rows, feature, float(t))))
            for t in grid
        ]
    if args.png:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(5, 4))
        for feature in FEATURES:
            xs = [a for _, _, a in curves[feature]]
            ys = [w for _, w, _ in curves[feature]]
            ax.plot(xs, ys, marker=".", label=f"best {feature} score")
        ax.set_xlabel("answerable questions stopped (lost)")
        ax.set_ylabel("withheld-source questions stopped (right)")
        ax.set_title(f"Retrieval-score gate, covidqa-dev ({len(rows)} questions)")
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        args.png.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(args.png, dpi=120)
    write_report(
        {
            "date": time.strftime("%Y-%m-%d"),
            "questions": len(rows),
            "seconds": round(seconds, 1),
            "medians": {
                kind: {f: round(statistics.median(r[kind][f] for r in rows), 4) for f in FEATURES}
                for kind in ("answerable", "withheld")
            },
            "cv": cv,
            "curves": curves,
            "rows": rows,
        },
        args.out,
    )


if __name__ == "__main__":
    main()
