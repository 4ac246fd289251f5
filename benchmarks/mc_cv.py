"""Choose the multiple-choice decision rule by k-fold cross-validation over a whole split.

    python benchmarks/mc_cv.py bench-out/litqa2-train-all/questions.jsonl --folds 5 \\
        --index ~/.cache/scholarloop/bench-index/HASH \\
        --out benchmarks/results/DATE/mc-cv.json --png benchmarks/results/DATE/mc-cv.png

A ``scholarloop bench`` run keeps, for every multiple-choice answer, what it was decided from
(``answer.option_scores``: the judge's P(support) for each option on each offered passage, and
the answer model's pick when it was asked). This script re-grades those records under every
rule of a grid, with no model call:

* ``judge``: the best-supported option stands if its P is at least ``t`` and it leads the
  runner-up by at least ``m``;
* ``hybrid``: as ``judge``, and a smaller lead stands when the answer model picked that option.
  A pick is known only where the run asked for it (a lead under the run's margin); where a rule
  would need a pick the run never asked for, the rule abstains, and the report counts how often.

Folds are fixed by a seeded shuffle. On each, the rule with the highest accuracy among those
with precision at least ``--min-precision`` on the other folds is chosen and scored on the held
fold, so the reported figure is never one the rule was chosen on. ``--modes hybrid`` restricts
the choice to the family the product can ship without changing how verdict options are answered;
the plot shows every family. The rule to ship is the same choice made on the whole split.

It also sorts every answerable question's outcome by where it was lost: the gold passage not
among the chunks retrieved (with ``--index``, replayed without a model), retrieved but not read,
read but offered to no option scoring (summary score below ``evidence.min_score``), the best
option under the threshold, a lead too small, the answer model disagreeing, or a wrong answer.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import cv_folds, write_report  # benchmarks/common.py: scripts run from this folder

from agent.core.evidence import LETTERS

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
THRESHOLDS = (0.4, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.9)
MARGINS = (0.0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3)
FLOORS = (0.4, 0.45, 0.5, 0.55)
Rule = Callable[[dict[str, Any]], str | None]


def load(paths: list[Path], ideals: dict[str, str | None]) -> list[dict[str, Any]]:
    """One record per multiple-choice scholarloop answer that kept its option scores."""
    out = []
    for path in paths:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        for line in raw.decode().splitlines():
            row = json.loads(line)
            if row.get("system") != "scholarloop" or row["id"] not in ideals:
                continue
            answer = row["answer"] or {}
            record = answer.get("option_scores") or {}
            options = row["options"]
            ideal = ideals[row["id"]] if row.get("answerable", True) else None
            out.append(
                {
                    "id": row["id"],
                    "target": LETTERS[options.index(ideal)] if ideal in options else None,
                    "scores": record.get("scores") or {},
                    "pick": record.get("pick"),
                    "run_choice": row.get("choice") if row.get("answered") else None,
                    "gold_rank": row.get("gold_rank"),
                    "evidence": answer.get("evidence") or [],
                    "tokens": row.get("tokens", 0),
                    "question": answer.get("question", ""),
                }
            )
    return out


def ranked(m: dict[str, Any]) -> list[tuple[float, str]]:
    best: dict[str, float] = {}
    for per_option in m["scores"].values():
        for letter, p in per_option.items():
            best[letter] = max(best.get(letter, 0.0), p)
    return sorted(((p, letter) for letter, p in best.items()), reverse=True)


def rule(t: float, margin: float, hybrid: bool, floor: float | None = None) -> Rule:
    """``floor``: a best option under ``t`` but at least ``floor`` stands if the answer model picks it."""

    def decide(m: dict[str, Any]) -> str | None:
        r = ranked(m)
        if not r:
            return None
        if r[0][0] < t:
            if floor is None or r[0][0] < floor or m["pick"] is None:
                return None
            return m["pick"] if m["pick"] in {other for q, other in r if q == r[0][0]} else None
        p, letter = r[0]
        if p - (r[1][0] if len(r) > 1 else 0.0) >= margin:
            return letter
        if not hybrid or m["pick"] is None:
            return None
        return m["pick"] if m["pick"] in {other for q, other in r if q == p} else None

    return decide


def grade(rows: list[dict[str, Any]], decide: Rule) -> dict[str, float]:
    answerable = [m for m in rows if m["target"] is not None]
    answered = [(m, d) for m in answerable if (d := decide(m)) is not None]
    correct = sum(d == m["target"] for m, d in answered)
    n = max(len(answerable), 1)
    return {
        "answerable": len(answerable),
        "answered": len(answered),
        "correct": correct,
        "accuracy": correct / n,
        "precision": correct / len(answered) if answered else 0.0,
        "coverage": len(answered) / n,
        "unanswerable_answered": sum(decide(m) is not None for m in rows if m["target"] is None),
    }


def loss(m: dict[str, Any], decide: Rule, t: float, retrieved: bool | None) -> str:
    """Where an answerable question was lost (or "right") under the rule ``decide``."""
    d = decide(m)
    if d is not None:
        return "right" if d == m["target"] else "wrong answer"
    if m["gold_rank"] is None:
        return "gold not read" if retrieved is not False else "gold not retrieved"
    if not m["scores"]:
        return "read, scored low (not offered)"
    r = ranked(m)
    if r[0][0] < t:
        return "best option under threshold"
    if r[0][1] != m["target"]:
        return "wrong option leads (abstained)"
    if m["pick"] is not None and m["pick"] != r[0][1]:
        return "lead too small, answer model disagrees"
    return "lead too small"


def retrieval_replay(
    index: Path, rows: list[dict[str, Any]], sources: dict[str, list[str]]
) -> dict[str, bool]:
    """Is a gold-paper chunk among the ``retrieval.top_k`` chunks ``gather_evidence`` ranks?"""
    from agent.cli.bench import doi_index, gold_documents
    from agent.core.settings import load_settings
    from corpus.embeddings import make_embedder
    from corpus.search import LocalSearch
    from corpus.store import Library

    settings = load_settings(environ={})
    lib = Library.open(index)
    searcher = LocalSearch(
        lib, make_embedder(lib.manifest.embedder), hybrid_weight=settings.retrieval.hybrid_weight
    )
    by_doi = doi_index(lib)
    out = {}
    for m in rows:
        gold = gold_documents(sources.get(m["id"], []), lib, by_doi)
        hits = searcher.search(m["question"], k=settings.retrieval.top_k)
        out[m["id"]] = any(h.chunk.doc_id in gold for h in hits)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "runs", nargs="+", type=Path, help="questions.jsonl (or .jsonl.gz) files written by scholarloop bench"
    )
    ap.add_argument("--set", type=Path, default=DATA / "sets" / "litqa2-train.jsonl")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--min-precision", type=float, default=0.85)
    ap.add_argument("--index", type=Path, default=None, help="the run's index, to replay retrieval")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--png", type=Path, default=None)
    ap.add_argument(
        "--picks",
        type=Path,
        default=None,
        help="picks the run never asked for (mc_pick_replay.py): adds the 'floor' family of rules",
    )
    ap.add_argument(
        "--modes",
        default="judge,hybrid",
        help="rule families to choose among; 'hybrid' alone keeps verdict options with the answer model",
    )
    ap.add_argument("--run-rule", default="hybrid t=0.6 m=0.1", help="the rule the stored run was made with")
    args = ap.parse_args()

    qs = [json.loads(line) for line in args.set.read_text().splitlines()]
    ideals = {q["id"]: q.get("ideal") for q in qs}
    rows = load(args.runs, ideals)
    if args.picks:
        replayed = json.loads(args.picks.read_text())["picks"]
        for r in rows:
            if r["pick"] is None and r["id"] in replayed:
                r["pick"] = replayed[r["id"]]
    rules = {
        f"{'hybrid' if h else 'judge'} t={t} m={m}": (rule(t, m, h), t, m)
        for h in (False, True)
        for t in THRESHOLDS
        for m in MARGINS
    }
    if args.picks:
        rules |= {
            f"floor t={t} m={m} f={f}": (rule(t, m, True, f), t, m)
            for t in THRESHOLDS
            for m in MARGINS
            for f in FLOORS
            if f < t
        }
    modes = set(args.modes.split(","))
    folds = cv_folds(len(rows), args.folds)
    per_fold: list[dict[str, Any]] = []
    for i, held in enumerate(folds):
        held_set = set(held)
        train = [r for j, r in enumerate(rows) if j not in held_set]
        test = [rows[j] for j in held]
        graded = {name: grade(train, r[0]) for name, r in rules.items() if name.split()[0] in modes}
        ok = [n for n, g in graded.items() if g["precision"] >= args.min_precision] or list(graded)
        chosen = max(ok, key=lambda n: (graded[n]["accuracy"], graded[n]["precision"], n))
        per_fold.append(
            {
                "fold": i,
                "questions": len(test),
                "chosen": chosen,
                "train": graded[chosen],
                "held_out": grade(test, rules[chosen][0]),
            }
        )
    pooled = {k: sum(f["held_out"][k] for f in per_fold) for k in ("answerable", "answered", "correct")}

    whole = {name: grade(rows, r[0]) for name, r in rules.items()}
    current = args.run_rule
    # The rule to ship: the same choice the folds made, now on the whole split. Its whole-split
    # figures are fitted; the pooled held-out figures above are the estimate to quote.
    mine = [n for n in whole if n.split()[0] in modes]
    ok = [n for n in mine if whole[n]["precision"] >= args.min_precision] or mine
    chosen = max(ok, key=lambda n: (whole[n]["accuracy"], whole[n]["precision"], n))
    sources = {q["id"]: list(q.get("sources") or []) for q in qs}
    retrieved = retrieval_replay(args.index, rows, sources) if args.index else {}

    def losses_under(name: str) -> dict[str, int]:
        fn, t, _ = rules[name]
        c = Counter(loss(r, fn, t, retrieved.get(r["id"])) for r in rows if r["target"] is not None)
        return dict(c.most_common())

    if args.png:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4.5))
        families = (
            ("judge", "tab:blue", "judge alone"),
            ("hybrid", "tab:orange", "hybrid (judge + pick)"),
            ("floor", "tab:green", "hybrid + pick under the threshold"),
        )
        for family, colour, label in families:
            pts = sorted((g["coverage"], g["precision"]) for n, g in whole.items() if n.split()[0] == family)
            if pts:
                ax.scatter([c for c, _ in pts], [p for _, p in pts], s=12, color=colour, label=label)
        for name, marker, label in ((current, "*", "run with"), (chosen, "D", "chosen")):
            g = whole[name]
            ax.scatter(
                [g["coverage"]], [g["precision"]], marker=marker, s=110, color="black",
                label=f"{label} ({name})",
            )  # fmt: skip
        ax.axhline(args.min_precision, color="grey", linestyle=":", linewidth=1)
        ax.set_xlabel("coverage (answerable questions answered)")
        ax.set_ylabel("precision (answered that are right)")
        ax.set_title(f"LitQA2 train, {len(rows)} questions: rules over the same evidence")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower left")
        fig.tight_layout()
        args.png.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(args.png, dpi=120)
    write_report(
        {
            "questions": len(rows),
            "answerable": sum(r["target"] is not None for r in rows),
            "without_option_scores": sum(not r["scores"] for r in rows),
            "median_tokens": statistics.median(r["tokens"] for r in rows) if rows else None,
            "min_precision": args.min_precision,
            "cv": {
                "folds": per_fold,
                # every question is held out once: pooled over the folds, these are whole-split figures
                "held_out_accuracy": round(pooled["correct"] / max(pooled["answerable"], 1), 3),
                "held_out_precision": round(pooled["correct"] / max(pooled["answered"], 1), 3),
                "held_out_coverage": round(pooled["answered"] / max(pooled["answerable"], 1), 3),
                "chosen_per_fold": [f["chosen"] for f in per_fold],
            },
            "run_rule_whole_split": {current: whole[current]},
            "losses_under_run_rule": losses_under(current),
            "chosen_rule": chosen,
            "chosen_rule_whole_split": whole[chosen],
            "losses_under_chosen_rule": losses_under(chosen),
            "rules_whole_split": {n: {k: round(v, 3) for k, v in g.items()} for n, g in whole.items()},
        },
        args.out,
    )


if __name__ == "__main__":
    main()
