"""Questions about "this study" in a library of many papers: when should a run stop and ask which?

    python benchmarks/unnamed_work_gate.py --work /tmp/covidqa \\
        --out benchmarks/results/DATE/unnamed-work-gate.json \\
        --png benchmarks/results/DATE/unnamed-work-gate.png

"What method is developed in this study?" names no paper. With the source paper withheld, a
COVID-QA run answers it from another paper's methods section, and with the source present it
usually does the same, since retrieval cannot tell which study is meant. ``evidence.unnamed_papers``
(``tools/gather_evidence.py``) stops a free-form run before any model call when the question
points at one unnamed work (:func:`agent.core.deixis.unnamed_work`) and the chunks that hold
enough of its terms (the coverage floor) come from ``N`` or more papers; the run then says which
papers it could mean.

For every question of ``sets/covidqa-dev.jsonl``, sources present and withheld, this replays the
first search round without a model (``coverage_gate.replay``) and counts the papers among the
covered chunks. What the rule costs: answerable questions stopped whose answering passage would
have been read (hit@``summarize_k`` with the floor). What it buys: withheld-source questions
stopped that the floor lets through. ``N`` is chosen by 5-fold cross-validation with the two
errors weighed alike (on four folds, the ``N`` with the fewest lost reads plus withheld questions
let through; ties go to the larger ``N``, which stops less), and scored on the fifth.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from common import (  # benchmarks/common.py
    covidqa_questions,
    covidqa_searcher,
    cv_folds,
    replay_arguments,
    require_covidqa,
    write_report,
)
from coverage_gate import read_hit, replay

from agent.core.deixis import unnamed_work
from agent.core.settings import load_settings

NEVER = 0  # the rule off


def covered_papers(first_round: list[Any], floor: float) -> int:
    """Distinct papers among the first round's chunks at or above the coverage floor."""
    return len({doc for doc, _text, coverage in first_round if coverage >= floor})


def stops(row: dict[str, Any], n: int, setting: str) -> bool:
    return n != NEVER and row["unnamed"] is not None and row[f"papers_{setting}"] >= n


def errors(rows: list[dict[str, Any]], n: int) -> dict[str, int]:
    lost = sum(r["hit_present"] and stops(r, n, "present") for r in rows)
    through = sum(r["withheld_passes_floor"] and not stops(r, n, "withheld") for r in rows)
    return {"lost_reads": lost, "withheld_through": through, "total": lost + through}


def choose(rows: list[dict[str, Any]], grid: list[int]) -> int:
    """The N with the fewest errors on ``rows``; ties go to the larger N (never counts as largest)."""
    order = sorted(grid, key=lambda n: (errors(rows, n)["total"], -(n or 10**6)))
    return order[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    replay_arguments(ap)
    ap.add_argument("--limit", type=int, default=None)
    args = ap.parse_args()
    require_covidqa()

    settings = load_settings(environ={})
    floor = settings.evidence.min_coverage
    read_k = settings.evidence.summarize_k
    searcher = covidqa_searcher(args.work)
    qs = covidqa_questions(args.limit)
    t0 = time.perf_counter()
    rows = []
    for q in qs:
        present = replay(searcher, q, set(), settings)
        withheld = replay(searcher, q, set(q["sources"]), settings)
        rows.append(
            {
                "id": q["id"],
                "question": q["question"],
                "unnamed": unnamed_work(q["question"]),
                "papers_present": covered_papers(present[0], floor),
                "papers_withheld": covered_papers(withheld[0], floor),
                "hit_present": read_hit(q, present, floor, read_k),
                "withheld_passes_floor": any(c >= floor for r in withheld for _, _, c in r),
            }
        )
    seconds = time.perf_counter() - t0

    grid = [NEVER, *range(1, settings.retrieval.paper_k + 1)]
    folds = cv_folds(len(rows), args.folds)
    per_fold = []
    for i, held in enumerate(folds):
        held_set = set(held)
        n = choose([r for j, r in enumerate(rows) if j not in held_set], grid)
        per_fold.append({"fold": i, "n": n, **errors([rows[j] for j in held], n)})
    held_out = {k: sum(f[k] for f in per_fold) for k in ("lost_reads", "withheld_through", "total")}
    hits = sum(r["hit_present"] for r in rows)
    through_floor = sum(r["withheld_passes_floor"] for r in rows)
    by_n = {
        str(n): {
            **errors(rows, n),
            "present_stopped": sum(stops(r, n, "present") for r in rows),
            "withheld_stopped": sum(r["withheld_passes_floor"] and stops(r, n, "withheld") for r in rows),
        }
        for n in grid
    }
    report = {
        "date": time.strftime("%Y-%m-%d"),
        "questions": len(rows),
        "unnamed_work_questions": sum(r["unnamed"] is not None for r in rows),
        "answering_passage_read": hits,
        "withheld_through_floor": through_floor,
        "hit_rate_unnamed": round(
            sum(r["hit_present"] for r in rows if r["unnamed"])
            / max(1, sum(bool(r["unnamed"]) for r in rows)),
            3,
        ),
        "hit_rate_other": round(
            sum(r["hit_present"] for r in rows if not r["unnamed"])
            / max(1, sum(not r["unnamed"] for r in rows)),
            3,
        ),
        "seconds": round(seconds, 1),
        "chosen_on_all": choose(rows, grid),
        "cv": {"folds": per_fold, "held_out": held_out},
        "by_n": by_n,
        "rows": [r for r in rows if r["unnamed"] is not None],
    }
    write_report(report, args.out)
    if args.png is not None:
        _plot(report, args.png)


def _plot(report: dict[str, Any], png: Path) -> None:
    """The trade-off over N: answering reads lost against withheld questions stopped."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hits, through = report["answering_passage_read"], report["withheld_through_floor"]
    points = [(int(n), v) for n, v in report["by_n"].items() if int(n) != NEVER]
    fig, ax = plt.subplots(figsize=(5.5, 4.2))
    xs = [v["lost_reads"] / hits for _, v in points]
    ys = [v["withheld_stopped"] / through for _, v in points]
    ax.plot(xs, ys, marker="o")
    for (n, _), x, y in zip(points, xs, ys, strict=True):
        label = f"N={n}" + (" (chosen)" if n == report["chosen_on_all"] else "")
        ax.annotate(label, (x, y), textcoords="offset points", xytext=(5, -9), fontsize=7)
    ax.set_xlabel(f"answering reads lost (of {hits})")
    ax.set_ylabel(f"withheld questions stopped (of {through} past the floor)")
    ax.set_title(f"'this study' gate, covidqa-dev ({report['questions']} questions)", fontsize=10)
    ax.grid(alpha=0.3)
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(png, dpi=120)


if __name__ == "__main__":
    main()
