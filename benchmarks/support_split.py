"""Does the faithfulness judge tell a supported free-form claim from an unsupported one?

    python benchmarks/support_split.py --questions 90 --scores bench-out/support-split.jsonl \\
        --rows benchmarks/results/DATE/covidqa-freeform-lazy/questions.jsonl \\
        --out benchmarks/results/DATE/support-split.json

RAGAS faithfulness is only as good as its per-statement verdict, and with the local 1.5B model
as the judge that verdict had never been checked on full-text claims. This script builds a
labelled split from covidqa-dev without a model, for each seeded question whose reference span
lies in one sentence of its source paper:

* *supported*: that sentence, against a passage of its paper holding it (consecutive
  sentences up to the chunk size, the sentence at a seeded position, as a chunk would hold it);
* *other paper*: the same sentence against the passage around the sentence of another paper
  that shares the most rare words with it (what a run cites when the source is withheld);
  pairs whose other sentence holds 60% of its content words are skipped, as possibly the same fact;
* *swapped*: the sentence with its reference span replaced by another question's span, against
  its own passage (a claim the passage contradicts in its one fact).

Each pair is scored four ways: RAGAS's faithfulness verdict
(:func:`agent.bench.ragas.statement_support`) on the whole passage (the first design) and on the
sentence windows nearest the statement (shipped), and the citation check's own judge prompt
(:func:`agent.core.prompts.judge_messages`) the same two ways. The threshold is the bench's
``evidence.judge_threshold``; 5-fold cross-validation reports what a bar chosen on four
folds (the highest accepting ≥ 95% of supported pairs) gives on the fifth. The citation check's
model-free sentence rule is replayed on the pairs of every eligible question, before and after
its additions check. ``--rows`` rescores, both RAGAS ways, the faithfulness of the answers
stored ``bench --free-text`` rows delivered.
Scores are appended to ``--scores`` as they come, so an interrupted run resumes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import re
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from answer_gate import _jsonl, _words  # benchmarks/: scripts run from this folder
from common import covidqa_split_arguments, read_scores, require_split, write_report

from agent.core.evidence import normalise
from agent.core.prompts import sentences
from agent.core.settings import load_settings

# RAGAS's faithfulness verdict (agent.bench.ragas) and the citation check's judge prompt
# (tools.verify_citations), each on the whole passage and on its sentence windows.
MODES = ("whole", "windows", "check", "check-windows")
RAGAS_MODES = MODES[:2]
THRESHOLDS = [round(0.05 * i, 2) for i in range(1, 20)]


def _passage(cut: list[str], at: int, rng: random.Random, limit: int) -> str:
    """Consecutive sentences of ``cut`` holding sentence ``at``, up to ``limit`` characters,
    starting a seeded number of sentences before it."""
    start = at - rng.randint(0, 6)
    start = max(0, start)
    while start < at and sum(len(s) for s in cut[start : at + 1]) > limit:
        start += 1
    end = at + 1
    while end < len(cut) and sum(len(s) for s in cut[start : end + 1]) <= limit:
        end += 1
    return " ".join(s.strip() for s in cut[start:end])


def pairs(set_path: Path, corpus: Path, n: int, seed: int, limit: int) -> list[dict[str, Any]]:
    """Up to three labelled (statement, passage) pairs for each of ``n`` seeded questions."""
    papers = {p["doc_id"]: p["text"] for p in _jsonl(corpus)}
    cut = {d: [s for s in sentences(t) if s.strip()] for d, t in papers.items()}
    words = {d: [_words(s) for s in ss] for d, ss in cut.items()}
    df: Counter[str] = Counter(w for ws in words.values() for bag in ws for w in bag)
    total = sum(len(ws) for ws in words.values())
    idf = {w: math.log(total / c) for w, c in df.items()}
    questions = _jsonl(set_path)
    rng = random.Random(seed)
    rng.shuffle(questions)
    ideals = [q.get("ideal") or "" for q in questions if len(q.get("ideal") or "") >= 3]
    out: list[dict[str, Any]] = []
    for q in questions:
        ideal, source = q.get("ideal") or "", (q.get("sources") or [""])[0]
        if len(normalise(ideal)) < 3 or source not in cut:
            continue
        span = re.compile(rf"\b{re.escape(normalise(ideal))}\b")
        qw = _words(q["question"])
        holding = [
            (sum(idf.get(w, 0.0) for w in qw & words[source][i]), i)
            for i, s in enumerate(cut[source])
            if 30 <= len(s.strip()) <= 400 and span.search(normalise(s))
        ]
        if not holding:
            continue
        at = max(holding)[1]
        claim = cut[source][at].strip()
        cw = words[source][at]
        qid = q["id"]
        out.append(
            {
                "id": f"{qid}|supported",
                "kind": "supported",
                "label": 1,
                "statement": claim,
                "passage": _passage(cut[source], at, rng, limit),
            }
        )
        best = max(
            (
                (sum(idf.get(w, 0.0) for w in cw & bag), d, i)
                for d, ws in words.items()
                if d != source
                for i, bag in enumerate(ws)
                if 30 <= len(cut[d][i].strip()) <= 400
            ),
            default=None,
        )
        if best is not None and len(cw & words[best[1]][best[2]]) < 0.6 * len(cw):
            out.append(
                {
                    "id": f"{qid}|other",
                    "kind": "other paper",
                    "label": 0,
                    "statement": claim,
                    "passage": _passage(cut[best[1]], best[2], rng, limit),
                }
            )
        raw = re.search(rf"(?<!\w){re.escape(ideal.strip())}(?!\w)", claim, re.IGNORECASE)
        own = next(p["passage"] for p in out if p["id"] == f"{qid}|supported")
        swap = next(
            (i for i in rng.sample(ideals, min(20, len(ideals))) if normalise(i) not in normalise(own)),
            None,
        )
        if raw is not None and swap is not None:
            out.append(
                {
                    "id": f"{qid}|swapped",
                    "kind": "swapped",
                    "label": 0,
                    "statement": claim[: raw.start()] + swap.strip() + claim[raw.end() :],
                    "passage": own,
                }
            )
        if len({p["id"].split("|")[0] for p in out}) == n:
            break
    return out


def _delivered(paths: list[Path]) -> list[dict[str, Any]]:
    """Each delivered claim of the stored rows, with the passages its answer gathered."""
    claims = []
    for path in paths:
        for r in _jsonl(path):
            answer = r.get("answer") or {}
            evidence = {e.get("key", ""): e.get("text", "") for e in answer.get("evidence") or []}
            if not r.get("answered") or not evidence:
                continue
            for n, c in enumerate(answer.get("claims") or []):
                cited = [k for k in c.get("citations") or [] if k in evidence]
                passages = [evidence[k] for k in cited] + [t for k, t in evidence.items() if k not in cited]
                claims.append(
                    {
                        "id": f"{path.parent.name}|{r['id']}|{n}",
                        "run": path.parent.name,
                        "row": r["id"],
                        "statement": c.get("text", ""),
                        "passages": passages,
                        "stored": (r.get("ragas") or {}).get("faithfulness"),
                    }
                )
    return claims


async def _score(judge: Any, mode: str, passage: str, statement: str) -> float:
    from agent.bench.ragas import statement_support, support_windows
    from agent.core.prompts import judge_messages

    if mode in RAGAS_MODES:
        return await statement_support(judge, passage, statement, windows=mode == "windows")
    texts = support_windows(passage, statement) if mode == "check-windows" else [passage]
    return max([(await judge.score_yes(judge_messages(statement, t))).p_yes for t in texts])


def _load(scores: Path) -> dict[str, dict[str, float]]:
    done: dict[str, dict[str, float]] = {}
    for rec in read_scores(scores):
        done[rec["key"]] = {**done.get(rec["key"], {}), **rec["p"]}
    return done


async def score_all(
    items: list[tuple[str, str, list[str], tuple[str, ...]]], scores: Path, threshold: float
) -> dict[str, dict[str, float]]:
    """Each item's modes' P(Yes) per (key, statement, passages, modes), appended to ``scores``
    (resumable; a record missing a mode gets only that mode scored).

    Over several passages the cited ones come first and the search stops at the first that
    reaches ``threshold``, as faithfulness does; the score kept is the best seen."""
    from agent.llm.factory import resolve_role_llms

    done = _load(scores)
    todo = [i for i in items if set(i[3]) - set(done.get(i[0], {}))]
    if todo:
        judge = resolve_role_llms(load_settings())["judge"]
        scores.parent.mkdir(parents=True, exist_ok=True)
        with scores.open("a") as fh:
            for n, (key, statement, passages, modes) in enumerate(todo, 1):
                p = dict(done.get(key, {}))
                for mode in (m for m in modes if m not in p):
                    best = 0.0
                    for passage in passages:
                        best = max(best, await _score(judge, mode, passage, statement))
                        if best >= threshold:
                            break
                    p[mode] = round(best, 4)
                done[key] = p
                fh.write(json.dumps({"key": key, "p": p}) + "\n")
                fh.flush()
                if n % 20 == 0:
                    print(f"{n}/{len(todo)} scored", flush=True)
    return done


def sentence_rule(made: list[dict[str, Any]]) -> dict[str, Any]:
    """How often the citation check's model-free sentence rule accepts each kind of pair,
    before and after the additions check (``tools.verify_citations._adds_nothing``)."""
    from tools.verify_citations import _restates, _same_words

    def accepts(statement: str, passage: str, full: bool) -> bool:
        cut = [x.strip() for x in sentences(passage) if len(x.strip()) >= 20]
        if full:
            return any(_restates(statement, x, passage) for x in cut)
        return any(_same_words(statement, x) for x in cut)

    out: dict[str, Any] = {}
    for name, full in (("same words (before)", False), ("same words, adds nothing (shipped)", True)):
        by: dict[str, list[bool]] = {}
        for m in made:
            by.setdefault(m["kind"], []).append(accepts(m["statement"], m["passage"], full))
        out[name] = {k: f"{sum(v)}/{len(v)}" for k, v in sorted(by.items())}
    return out


def _at(rows: list[dict[str, Any]], mode: str, t: float) -> dict[str, float]:
    by: dict[str, list[bool]] = {}
    for r in rows:
        by.setdefault(r["kind"], []).append(r["p"][mode] >= t)
    return {kind: round(sum(v) / len(v), 3) for kind, v in sorted(by.items())}


def _auc(rows: list[dict[str, Any]], mode: str) -> float:
    pos = [r["p"][mode] for r in rows if r["label"]]
    neg = [r["p"][mode] for r in rows if not r["label"]]
    wins = sum((p > q) + 0.5 * (p == q) for p in pos for q in neg)
    return round(wins / ((len(pos) * len(neg)) or 1), 3)


def _choose(rows: list[dict[str, Any]], mode: str, keep: float) -> float:
    pos = sorted(r["p"][mode] for r in rows if r["label"])
    ok = [t for t in THRESHOLDS if sum(p >= t for p in pos) >= keep * len(pos)]
    return max(ok) if ok else THRESHOLDS[0]


def cross_validate(
    rows: list[dict[str, Any]], mode: str, keep: float, folds: int, seed: int
) -> dict[str, Any]:
    ids = sorted({r["id"].split("|")[0] for r in rows})
    random.Random(seed).shuffle(ids)
    fold_of = {q: i % folds for i, q in enumerate(ids)}
    bars, held = [], []
    for f in range(folds):
        train = [r for r in rows if fold_of[r["id"].split("|")[0]] != f]
        test = [r for r in rows if fold_of[r["id"].split("|")[0]] == f]
        t = _choose(train, mode, keep)
        bars.append(t)
        held += [{**r, "accepted": r["p"][mode] >= t} for r in test]
    by: dict[str, list[bool]] = {}
    for r in held:
        by.setdefault(r["kind"], []).append(r["accepted"])
    return {
        "fold_bars": bars,
        "held_out_accepted": {k: round(sum(v) / len(v), 3) for k, v in sorted(by.items())},
    }


def _delivered_faithfulness(
    scored: list[dict[str, Any]], scores: dict[str, dict[str, float]], t: float
) -> dict[str, Any]:
    """Per run: RAGAS faithfulness as the bench averages it (each answer's share of supported
    claims, then the mean over answers) both ways, beside the value the bench stored."""
    out: dict[str, Any] = {}
    for run in dict.fromkeys(d["run"] for d in scored):
        answers: dict[str, list[dict[str, Any]]] = {}
        for d in scored:
            if d["run"] == run:
                answers.setdefault(d["row"], []).append(d)
        per: dict[str, Any] = {"answers": len(answers), "claims": sum(map(len, answers.values()))}
        for m in RAGAS_MODES:
            shares = [
                statistics.mean(scores[f"row|{c['id']}"][m] >= t for c in cs) for cs in answers.values()
            ]
            per[m] = round(statistics.mean(shares), 3)
        stored = [cs[0]["stored"] for cs in answers.values() if cs[0]["stored"] is not None]
        per["stored"] = round(statistics.mean(stored), 3) if stored else None
        out[run] = per
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    covidqa_split_arguments(ap, questions=90)
    ap.add_argument("--keep", type=float, default=0.95, help="supported pairs a CV bar must accept")
    ap.add_argument("--scores", type=Path, required=True, help="P(Yes) per pair (resumable)")
    ap.add_argument("--rows", type=Path, nargs="*", default=[], help="bench --free-text rows to rescore")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--report-only", action="store_true", help="report what --scores holds; no model")
    args = ap.parse_args()
    require_split(args)
    settings = load_settings(environ={})
    # every eligible question for the model-free sentence rule; the first --questions of them
    # (the same pairs a shorter run builds) for the judge
    every = pairs(args.set, args.corpus, 10**6, args.seed, settings.chunking.chunk_chars)
    first = list(dict.fromkeys(m["id"].split("|")[0] for m in every))[: args.questions]
    made = [m for m in every if m["id"].split("|")[0] in set(first)]
    delivered = _delivered(args.rows)
    # the delivered claims first: fewer, and the figure the bench reports
    items = [(f"row|{d['id']}", d["statement"], d["passages"], RAGAS_MODES) for d in delivered]
    items += [(m["id"], m["statement"], [m["passage"]], MODES) for m in made]
    t = settings.evidence.judge_threshold
    scores = _load(args.scores) if args.report_only else asyncio.run(score_all(items, args.scores, t))
    rows = [{**m, "p": scores[m["id"]]} for m in made if set(MODES) <= set(scores.get(m["id"], {}))]
    report: dict[str, Any] = {
        "questions": len({r["id"].split("|")[0] for r in rows}),
        "pairs": dict(Counter(r["kind"] for r in rows)),
        "threshold": t,
        "sentence_rule": {"questions": len({m["id"].split("|")[0] for m in every}), **sentence_rule(every)},
        "modes": {
            mode: {
                "auc": _auc(rows, mode),
                "accepted_at_threshold": _at(rows, mode, t),
                "curve": {str(x): _at(rows, mode, x) for x in THRESHOLDS},
                "cv": cross_validate(rows, mode, args.keep, args.folds, args.seed),
            }
            for mode in MODES
        },
    }
    scored = [d for d in delivered if set(RAGAS_MODES) <= set(scores.get(f"row|{d['id']}", {}))]
    if scored:
        report["delivered"] = _delivered_faithfulness(scored, scores, t)
        report["delivered_claims"] = [
            {"id": d["id"], "statement": d["statement"], "p": scores[f"row|{d['id']}"]} for d in scored
        ]
    report["examples"] = [{k: r[k] for k in ("id", "kind", "statement", "p")} for r in rows[:6]]
    write_report(report, args.out)


if __name__ == "__main__":
    main()
