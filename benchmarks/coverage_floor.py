"""Where should the coverage floor sit? Chosen on what a run delivers, by cross-validation.

    R=benchmarks/results/2026-12-06
    python benchmarks/coverage_floor.py --work /tmp/covidqa \\
        --present $R/covidqa-freeform-seed{4,5,6,7}-unnamed \\
        --withheld $R/covidqa-freeform-seed{4,5,6,7}-withheld-unnamed \\
        --hand $R/hand-graded.json $R/hand-graded-seed7.json \\
        --out benchmarks/results/DATE/coverage-floor.json --png benchmarks/results/DATE/coverage-floor.png

``coverage_gate.py`` picks the highest floor that stops at most a chosen share of answerable
questions; the share is a free choice, and stopping an answerable question and reading the
answering passage are not what a user sees. What a user sees is an answer delivered for a
question whose paper is absent, or a correct answer lost. This script weighs those two alike.

Without a model it replays, for every covidqa-dev question with its source present and withheld,
what a run reads at each floor ``t`` (``coverage_gate.replay``; the unnamed-work gate of
``evidence.unnamed_papers`` applied as the run applies it): a withheld question is stopped or
goes on; a present one is stopped, reads the answering passage (the reference sentence inside a
read chunk of the source), or reads something else. Real runs at the shipped floor give the rates
that turn those states into what is delivered: the share of withheld questions past the floor
that end in an answer, and the share of present questions in each state whose answer is correct
by hand. Expected errors at ``t`` = withheld answers + correct answers lost (against reading the
answering passage for every question). The floor is chosen by 5-fold CV over the whole split (the
fewest expected errors on four folds, scored on the fifth); a bootstrap over the real runs shows
how far the choice moves with the rates.
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path
from typing import Any

import numpy as np
from common import (  # benchmarks/common.py
    covidqa_questions,
    covidqa_searcher,
    cv_folds,
    hand_labels,
    read_scores,
    replay_arguments,
    require_covidqa,
    write_report,
)
from coverage_gate import read_hit, replay
from unnamed_work_gate import covered_papers

from agent.core.deixis import unnamed_work
from agent.core.settings import load_settings

GRID = [round(float(t), 3) for t in np.arange(0.30, 0.801, 0.025)]
STOPPED, OTHER, GOLD = "stopped", "other", "gold"


def stopped(q: dict[str, Any], rounds: list[list[Any]], t: float, unnamed_n: int | None) -> bool:
    """Does a run stop before reading at floor ``t``: no chunk covered in any search round, or the
    unnamed-work rule (``evidence.unnamed_papers``) on the first round's covered papers?"""
    if not any(c >= t for r in rounds for _, _, c in r):
        return True
    return (
        unnamed_n is not None
        and bool(unnamed_work(q["question"]))
        and covered_papers(rounds[0], t) >= unnamed_n
    )


def present_state(
    q: dict[str, Any], rounds: list[list[Any]], t: float, read_k: int, unnamed_n: int | None
) -> str:
    """What a run with its source present does at floor ``t``."""
    if stopped(q, rounds, t, unnamed_n):
        return STOPPED
    return GOLD if read_hit(q, rounds, t, read_k) else OTHER


def load_runs(dirs: list[Path]) -> list[dict[str, Any]]:
    return [row for d in dirs for row in read_scores(d / "questions.jsonl")]


def rates(
    rows: dict[str, dict[str, Any]],
    present: list[dict[str, Any]],
    withheld: list[dict[str, Any]],
    hand: dict[tuple[str, str], bool],
    floor: float,
) -> dict[str, float]:
    """The real runs' rates at the floor they ran with: P(answer | withheld past the floor), and
    P(correct by hand | present state)."""
    through = [r for r in withheld if rows[r["id"]]["withheld"][str(floor)]]
    counts = {GOLD: [0, 0], OTHER: [0, 0]}
    for r in present:
        state = rows[r["id"]]["present"][str(floor)]
        if state == STOPPED:
            continue
        ft = r["free_text"]
        correct = False
        if ft["answered"]:
            key = (r["id"], ft["text"].strip()[:50])
            if key not in hand:
                raise SystemExit(f"no hand label for the answer to {r['id']}: grade it first")
            correct = hand[key]
        counts[state][0] += correct
        counts[state][1] += 1
    return {
        "withheld_answered": sum(r["free_text"]["answered"] for r in through) / max(1, len(through)),
        GOLD: counts[GOLD][0] / max(1, counts[GOLD][1]),
        OTHER: counts[OTHER][0] / max(1, counts[OTHER][1]),
        "n_withheld_through": len(through),
        "n_gold": counts[GOLD][1],
        "n_other": counts[OTHER][1],
    }


def expected(rows: list[dict[str, Any]], t: float, rate: dict[str, float]) -> dict[str, float]:
    """Expected withheld answers and correct answers lost at floor ``t``."""
    key = str(t)
    answers = rate["withheld_answered"] * sum(r["withheld"][key] for r in rows)
    value = {GOLD: rate[GOLD], OTHER: rate[OTHER], STOPPED: 0.0}
    lost = sum(rate[GOLD] - value[r["present"][key]] for r in rows)
    return {"withheld_answers": answers, "correct_lost": lost, "errors": answers + lost}


def choose(rows: list[dict[str, Any]], rate: dict[str, float]) -> float:
    """The floor with the fewest expected errors; ties go to the lower floor (it stops less)."""
    return min(GRID, key=lambda t: (round(expected(rows, t, rate)["errors"], 9), t))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    replay_arguments(ap)
    ap.add_argument(
        "--present", type=Path, nargs="+", required=True, help="bench output folders, sources present"
    )
    ap.add_argument("--withheld", type=Path, nargs="+", required=True, help="the same runs, sources withheld")
    ap.add_argument(
        "--hand", type=Path, nargs="+", required=True, help="hand-graded answers (hand-graded*.json)"
    )
    ap.add_argument("--run-floor", type=float, default=0.45, help="the floor the real runs used")
    ap.add_argument(
        "--run-unnamed-papers",
        type=int,
        default=2,
        help="evidence.unnamed_papers as the real runs used it, applied at every floor",
    )
    ap.add_argument("--bootstrap", type=int, default=500)
    args = ap.parse_args()
    require_covidqa()

    settings = load_settings(environ={})
    read_k, unnamed_n = settings.evidence.summarize_k, args.run_unnamed_papers
    searcher = covidqa_searcher(args.work)
    t0 = time.perf_counter()
    rows = []
    grid = sorted({*GRID, args.run_floor})
    for q in covidqa_questions():
        p = replay(searcher, q, set(), settings)
        w = replay(searcher, q, set(q["sources"]), settings)
        rows.append(
            {
                "id": q["id"],
                "present": {str(t): present_state(q, p, t, read_k, unnamed_n) for t in grid},
                "withheld": {str(t): not stopped(q, w, t, unnamed_n) for t in grid},
            }
        )
    seconds = time.perf_counter() - t0
    by_id = {r["id"]: r for r in rows}
    present, withheld = load_runs(args.present), load_runs(args.withheld)
    hand = hand_labels(args.hand)
    rate = rates(by_id, present, withheld, hand, args.run_floor)

    folds = cv_folds(len(rows), args.folds)
    per_fold = []
    for i, held in enumerate(folds):
        held_set = set(held)
        t = choose([r for j, r in enumerate(rows) if j not in held_set], rate)
        test = expected([rows[j] for j in held], t, rate)
        base = expected([rows[j] for j in held], args.run_floor, rate)
        per_fold.append(
            {"fold": i, "floor": t, **_rounded(test), "errors_at_run_floor": round(base["errors"], 2)}
        )

    # How far the choice moves with the rates: resample the real runs' questions.
    rng = random.Random(0)
    ids = sorted({r["id"] for r in present} & {r["id"] for r in withheld})
    p_by, w_by = {r["id"]: r for r in present}, {r["id"]: r for r in withheld}
    chosen = []
    for _ in range(args.bootstrap):
        sample = [rng.choice(ids) for _ in ids]
        chosen.append(
            choose(
                rows, rates(by_id, [p_by[i] for i in sample], [w_by[i] for i in sample], hand, args.run_floor)
            )
        )

    n = len(rows)
    curve = []
    for t in GRID:
        e = expected(rows, t, rate)
        curve.append(
            {
                "floor": t,
                **_rounded(e),
                "withheld_abstention": round(1 - e["withheld_answers"] / n, 3),
                "withheld_through": sum(r["withheld"][str(t)] for r in rows),
                "present_stopped": sum(r["present"][str(t)] == STOPPED for r in rows),
                "answering_passage_read": sum(r["present"][str(t)] == GOLD for r in rows),
            }
        )
    report = {
        "date": time.strftime("%Y-%m-%d"),
        "questions": n,
        "seconds": round(seconds, 1),
        "run_floor": args.run_floor,
        "rates": {k: round(v, 3) for k, v in rate.items()},
        "chosen_on_all": choose(rows, rate),
        "cv": {
            "folds": per_fold,
            "held_out_errors": round(sum(f["errors"] for f in per_fold), 1),
            "held_out_errors_at_run_floor": round(sum(f["errors_at_run_floor"] for f in per_fold), 1),
        },
        "bootstrap": {str(t): chosen.count(t) for t in sorted(set(chosen))},
        "curve": curve,
        # per question, one letter per floor of "grid": present g(old read)/o(ther)/s(topped),
        # withheld p(asses)/s(topped)
        "grid": grid,
        "rows": [
            {
                "id": r["id"],
                "present": "".join(r["present"][str(t)][0] for t in grid),
                "withheld": "".join("p" if r["withheld"][str(t)] else "s" for t in grid),
            }
            for r in rows
        ],
    }
    write_report(report, args.out)
    if args.png is not None:
        _plot(report, args.png)


def _rounded(e: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 2) for k, v in e.items()}


def _plot(report: dict[str, Any], png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    c = report["curve"]
    xs = [p["floor"] for p in c]
    fig, ax = plt.subplots(figsize=(5.8, 4.2))
    ax.plot(xs, [p["withheld_answers"] for p in c], label="withheld questions answered (expected)")
    ax.plot(xs, [p["correct_lost"] for p in c], label="correct answers lost (expected)")
    ax.plot(xs, [p["errors"] for p in c], "k", lw=2, label="both")
    ax.axvline(report["run_floor"], color="grey", ls=":", label=f"runs' floor {report['run_floor']}")
    ax.axvline(report["chosen_on_all"], color="red", ls="--", label=f"chosen {report['chosen_on_all']}")
    ax.set_xlabel("coverage floor (evidence.min_coverage)")
    ax.set_ylabel(f"expected errors over {report['questions']} questions")
    ax.set_title("Coverage floor, covidqa-dev: what a run delivers", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(png, dpi=120)


if __name__ == "__main__":
    main()
