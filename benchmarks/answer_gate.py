"""Does a verified free-form answer answer the question, or only share its topic?

    python benchmarks/answer_gate.py --questions 300 --scores /tmp/answer-gate.jsonl \\
        --runs bench-out/freeform-seed4/questions.jsonl \\
        --withheld-runs bench-out/freeform-seed4-withheld/questions.jsonl \\
        --out benchmarks/results/DATE/answer-gate.json --png benchmarks/results/DATE/answer-gate.png

The citation check proves each claim is in the passage it cites; it cannot see that the claim
answers something else. With the answering paper withheld, the local answer model still writes a
true, verified sentence from a related paper, and the run delivers it. This script measures a
gate on the judge's P(Yes) for "does the statement answer the question?" (the prompt
:func:`agent.core.prompts.answers_messages`) on every sampled covidqa-dev question, twice:

* *answers*: the sentence of the question's source paper that holds the reference span;
* *off-question*: the sentence of another paper that shares the most content words with the
  question and does not hold the span: what a run finds when the source is withheld.

The threshold is chosen by 5-fold cross-validation (on four folds: the most off-question
statements stopped while at most ``--max-loss`` of the answering ones are; scored on the
fifth). ``--runs`` and ``--withheld-runs`` score the answers real ``bench --free-text`` runs
delivered (the verified claims, joined), so the chosen threshold can be read against them.
Scores are appended to ``--scores`` as they come, so an interrupted run resumes.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import math
import random
import re
from collections import Counter
from pathlib import Path
from typing import Any

from common import (
    covidqa_split_arguments,
    read_scores,
    require_split,
    write_report,
)  # benchmarks/common.py: scripts run from this folder

from agent.core.evidence import normalise
from agent.core.prompts import answers_messages, sentences
from agent.core.settings import load_settings
from agent.llm.factory import resolve_role_llms

_STOP = frozenset(
    re.findall(
        r"\w+",
        "the and for with that this from what which how are was were does did has "
        "have its into who why when where can been",
    )
)


def _words(text: str) -> set[str]:
    return {w for w in normalise(text).split() if len(w) > 2 and w not in _STOP}


def _jsonl(path: Path) -> list[dict[str, Any]]:
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return [json.loads(line) for line in raw.decode().splitlines() if line.strip()]


def pairs(set_path: Path, corpus: Path, n: int, seed: int) -> list[dict[str, str]]:
    """One answering and one off-question statement for each of ``n`` seeded questions.

    Both are the sentence that shares the most question words, weighted by rarity (IDF over all
    sentences, as BM25 would): the answering one among the source's sentences that hold the
    reference span as whole words, the off-question one among the other papers' sentences.
    """
    papers = {p["doc_id"]: p["text"] for p in _jsonl(corpus)}
    cut = {d: [s.strip() for s in sentences(t) if 30 <= len(s.strip()) <= 400] for d, t in papers.items()}
    bags = {d: [(s, _words(s)) for s in ss] for d, ss in cut.items()}
    df: Counter[str] = Counter(w for bag in bags.values() for _, words in bag for w in words)
    total = sum(len(bag) for bag in bags.values())
    idf = {w: math.log(total / c) for w, c in df.items()}
    questions = _jsonl(set_path)
    random.Random(seed).shuffle(questions)
    out: list[dict[str, str]] = []
    for q in questions:
        ideal = normalise(q.get("ideal") or "")
        source = (q.get("sources") or [""])[0]
        if len(ideal) < 3 or source not in cut:
            continue
        span = re.compile(rf"\b{re.escape(ideal)}\b")
        qw = _words(q["question"])

        def match(words: set[str], qw: set[str] = qw) -> float:
            return sum(idf.get(w, 0.0) for w in qw & words)

        holding = [(match(w), s) for s, w in bags[source] if span.search(normalise(s))]
        others = [
            (match(w), s)
            for d, bag in bags.items()
            if d != source
            for s, w in bag
            if not span.search(normalise(s))
        ]
        if not holding or not others:
            continue
        answer = max(holding, key=lambda x: x[0])[1]
        other = max(others, key=lambda x: x[0])[1]
        out.append({"id": q["id"], "question": q["question"], "answers": answer, "off_question": other})
        if len(out) == n:
            break
    return out


def _slug(text: str) -> str:
    return re.sub(r"\W+", " ", text)[:200]


def _delivered(path: Path) -> list[dict[str, Any]]:
    rows = []
    for r in _jsonl(path):
        answer = r.get("answer") or {}
        claims = [c.get("text", "") for c in answer.get("claims") or []]
        if r.get("answered") and claims:
            ft = r.get("free_text") or {}
            rows.append(
                {
                    "id": r["id"],
                    "question": answer.get("question", ""),
                    "text": " ".join(claims),
                    "correct": ft.get("correct"),
                }
            )
    return rows


async def score_all(items: list[tuple[str, str, str]], scores: Path) -> dict[str, float]:
    """P(Yes) per (key, question, statement), appended to ``scores`` and read back on resume."""
    done: dict[str, float] = {rec["key"]: rec["p"] for rec in read_scores(scores)}
    todo = [i for i in items if i[0] not in done]
    if todo:
        judge = resolve_role_llms(load_settings())["judge"]
        with scores.open("a") as fh:
            for n, (key, question, statement) in enumerate(todo, 1):
                p = (await judge.score_yes(answers_messages(question, statement))).p_yes
                done[key] = round(p, 4)
                fh.write(json.dumps({"key": key, "p": done[key]}) + "\n")
                fh.flush()
                if n % 25 == 0:
                    print(f"{n}/{len(todo)} scored", flush=True)
    return done


THRESHOLDS = [round(0.05 * i, 2) for i in range(1, 20)]


def rates(pos: list[float], neg: list[float], t: float) -> tuple[float, float]:
    """(share of answering statements kept, share of off-question statements stopped) at ``t``."""
    kept = sum(p >= t for p in pos) / (len(pos) or 1)
    stopped = sum(p < t for p in neg) / (len(neg) or 1)
    return kept, stopped


def choose(pos: list[float], neg: list[float], max_loss: float) -> float:
    ok = [t for t in THRESHOLDS if 1 - rates(pos, neg, t)[0] <= max_loss]
    return max(ok, key=lambda t: (rates(pos, neg, t)[1], -t)) if ok else THRESHOLDS[0]


def cross_validate(rows: list[dict[str, Any]], max_loss: float, folds: int, seed: int) -> dict[str, Any]:
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    per_fold, kept, stopped = [], 0, 0
    for f in range(folds):
        held = {i for j, i in enumerate(order) if j % folds == f}
        train = [r for i, r in enumerate(rows) if i not in held]
        test = [r for i, r in enumerate(rows) if i in held]
        t = choose([r["p_answers"] for r in train], [r["p_off"] for r in train], max_loss)
        k, s = rates([r["p_answers"] for r in test], [r["p_off"] for r in test], t)
        kept += round(k * len(test))
        stopped += round(s * len(test))
        per_fold.append(
            {"fold": f, "questions": len(test), "threshold": t, "kept": round(k, 3), "stopped": round(s, 3)}
        )
    n = len(rows) or 1
    return {"folds": per_fold, "held_out_kept": round(kept / n, 3), "held_out_stopped": round(stopped / n, 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    covidqa_split_arguments(ap, questions=300)
    ap.add_argument("--max-loss", type=float, default=0.05, help="answering statements one may stop")
    ap.add_argument("--scores", type=Path, required=True, help="P(Yes) per statement (resumable)")
    ap.add_argument(
        "--runs", type=Path, nargs="*", default=[], help="bench --free-text rows, sources present"
    )
    ap.add_argument(
        "--withheld-runs", type=Path, nargs="*", default=[], help="rows of --withhold-sources runs"
    )
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--png", type=Path, default=None)
    args = ap.parse_args()
    require_split(args)

    made = pairs(args.set, args.corpus, args.questions, args.seed)
    present = [(r, "present") for p in args.runs for r in _delivered(p)]
    withheld = [(r, "withheld") for p in args.withheld_runs for r in _delivered(p)]
    items = [(f"{m['id']}|answers", m["question"], m["answers"]) for m in made]
    items += [(f"{m['id']}|off", m["question"], m["off_question"]) for m in made]
    delivered = [
        (f"run|{kind}|{_slug(r['text'])}", r["question"], r["text"]) for r, kind in present + withheld
    ]
    scores = asyncio.run(score_all(items + delivered, args.scores))

    rows = [{**m, "p_answers": scores[f"{m['id']}|answers"], "p_off": scores[f"{m['id']}|off"]} for m in made]
    cv = cross_validate(rows, args.max_loss, args.folds, args.seed)
    t_all = choose([r["p_answers"] for r in rows], [r["p_off"] for r in rows], args.max_loss)
    runs = [
        {"kind": kind, "id": r["id"], "correct": r["correct"], "p": scores[key]}
        for (r, kind), (key, _, _) in zip(present + withheld, delivered, strict=True)
    ]

    def at(t: float) -> dict[str, int]:
        return {
            "present_correct_kept": sum(x["p"] >= t for x in runs if x["kind"] == "present" and x["correct"]),
            "present_correct": sum(1 for x in runs if x["kind"] == "present" and x["correct"]),
            "present_wrong_kept": sum(
                x["p"] >= t for x in runs if x["kind"] == "present" and not x["correct"]
            ),
            "present_wrong": sum(1 for x in runs if x["kind"] == "present" and not x["correct"]),
            "withheld_stopped": sum(x["p"] < t for x in runs if x["kind"] == "withheld"),
            "withheld_answered": sum(1 for x in runs if x["kind"] == "withheld"),
        }

    report = {
        "questions": len(rows),
        "max_loss": args.max_loss,
        "cv": cv,
        "threshold_whole_sample": t_all,
        "curve": {
            str(t): dict(
                zip(
                    ("kept", "stopped"),
                    rates([r["p_answers"] for r in rows], [r["p_off"] for r in rows], t),
                    strict=True,
                )
            )
            for t in THRESHOLDS
        },
        "delivered_answers_at_threshold": at(t_all) if runs else None,
        "delivered_answers": runs,
        "examples": rows[:5],
    }
    write_report(report, args.out)
    if args.png is not None:
        _plot(report, args.png)


def _plot(report: dict[str, Any], png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curve = report["curve"]
    fig, ax = plt.subplots(figsize=(6, 4.5))
    ax.plot(
        [v["stopped"] for v in curve.values()],
        [v["kept"] for v in curve.values()],
        "o-",
        ms=3,
        label="covidqa-dev statements, one threshold per point",
    )
    t = str(report["threshold_whole_sample"])
    ax.plot(curve[t]["stopped"], curve[t]["kept"], "kD", ms=9, label=f"chosen: P(Yes) ≥ {t}")
    ax.set_xlabel("off-question statements stopped")
    ax.set_ylabel("answering statements kept")
    ax.set_title(f"Does the statement answer the question? ({report['questions']} questions)")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower left", fontsize=8)
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(png, dpi=110)


if __name__ == "__main__":
    main()
