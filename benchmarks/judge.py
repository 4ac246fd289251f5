"""Citation-judge benchmark on SciFact claim/abstract pairs, beside an embedding-cosine baseline.

Pairs: (claim, its gold abstract) labelled *supported* or *refuted*, and (claim, an unrelated
abstract) as *unrelated*. Positive = supported. Reports AUC, precision and recall of
"supported" at the judge threshold, the false-accept rate on refuted pairs (the dangerous
error), and pairs/s, for the judge (P(Yes) from the model's logits) and for cosine similarity
of MiniLM embeddings, in one run.

    python benchmarks/judge.py --per-label 60 --model local:qwen2.5-coder-1.5b --out bench-out/judge.json
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import random
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import numpy as np
from common import write_report  # benchmarks/common.py: scripts run from this folder

from agent.core.prompts import judge_messages
from agent.core.settings import load_settings
from agent.llm.factory import resolve_llm
from corpus.embeddings import make_embedder

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def auc(scores: list[float], labels: list[int]) -> float:
    """Probability a random positive outranks a random negative (ties count half)."""
    pos = [s for s, y in zip(scores, labels, strict=True) if y]
    neg = [s for s, y in zip(scores, labels, strict=True) if not y]
    if not pos or not neg:
        return float("nan")
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def at_threshold(scores: list[float], labels: list[int], kinds: list[str], t: float) -> dict[str, float]:
    pred = [s >= t for s in scores]
    tp = sum(p and y for p, y in zip(pred, labels, strict=True))
    fp = sum(p and not y for p, y in zip(pred, labels, strict=True))
    fn = sum((not p) and y for p, y in zip(pred, labels, strict=True))
    refuted = [p for p, k in zip(pred, kinds, strict=True) if k == "refuted"]
    unrelated = [p for p, k in zip(pred, kinds, strict=True) if k == "unrelated"]
    return {
        "threshold": t,
        "precision": tp / (tp + fp) if tp + fp else 0.0,
        "recall": tp / (tp + fn) if tp + fn else 0.0,
        "false_accept_refuted": sum(refuted) / len(refuted) if refuted else 0.0,
        "false_accept_unrelated": sum(unrelated) / len(unrelated) if unrelated else 0.0,
    }


def pairs(per_label: int, seed: int, exclude: frozenset[str] = frozenset()) -> list[tuple[str, str, str]]:
    """Supported, refuted and unrelated (claim, abstract, kind) triples; ``exclude`` lists claims to skip."""
    abstracts = {}
    with gzip.open(DATA / "corpus" / "scifact-abstracts.jsonl.gz", "rt") as fh:
        for line in fh:
            row = json.loads(line)
            abstracts[row["doc_id"]] = (row.get("title") or "") + ". " + row["text"]
    rng = random.Random(seed)
    by_label: dict[str, list[tuple[str, str, str]]] = {"supported": [], "refuted": []}
    for line in (DATA / "sets" / "scifact-train.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row.get("ideal") in by_label and row["sources"][0] in abstracts:
            claim = row["question"].split("Claim:", 1)[1].strip()
            if claim in exclude:
                continue
            by_label[row["ideal"]].append((claim, abstracts[row["sources"][0]], row["ideal"]))
    out = []
    ids = list(abstracts)
    for rows in by_label.values():
        out += rng.sample(rows, min(per_label, len(rows)))
    for claim, _, _ in rng.sample(by_label["supported"], min(per_label, len(by_label["supported"]))):
        out.append((claim, abstracts[rng.choice(ids)], "unrelated"))
    rng.shuffle(out)
    return out


async def judge_scores(model: str, data: list[tuple[str, str, str]]) -> tuple[list[float], float]:
    settings = load_settings()
    llm = resolve_llm(model, settings)
    t0 = time.perf_counter()
    scores = []
    for claim, passage, _ in data:
        scores.append((await llm.score_yes(judge_messages(claim, passage))).p_yes)
    return scores, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-label", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", default="local:qwen2.5-coder-1.5b")
    ap.add_argument("--threshold", type=float, default=0.5)
    ap.add_argument(
        "--held-out-from",
        type=int,
        default=None,
        metavar="SEED",
        help="leave out every claim of the --per-label sample drawn with SEED (a threshold chosen on "
        "that sample is then tested on claims it never saw)",
    )
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    seen = frozenset()
    if args.held_out_from is not None:
        seen = frozenset(c for c, _, _ in pairs(args.per_label, args.held_out_from))
    data = pairs(args.per_label, args.seed, seen)
    labels = [1 if k == "supported" else 0 for _, _, k in data]
    kinds = [k for _, _, k in data]
    embedder = make_embedder("minilm")
    t0 = time.perf_counter()
    c = embedder.embed_documents([c for c, _, _ in data])
    p = embedder.embed_documents([p for _, p, _ in data])
    cos = [float(x) for x in np.sum(c * p, axis=1)]
    cos_s = time.perf_counter() - t0
    judge, judge_s = asyncio.run(judge_scores(args.model, data))
    # the cosine baseline gets its best threshold on this very data (an optimistic baseline)
    cos_best = max(
        (at_threshold(cos, labels, kinds, t) for t in sorted(set(cos))),
        key=lambda r: r["precision"] + r["recall"],
    )
    report = {
        "pairs": len(data),
        "seed": args.seed,
        "held_out_from": args.held_out_from,
        "by_kind": {k: kinds.count(k) for k in set(kinds)},
        "judge": {
            "model": args.model,
            "auc": auc(judge, labels),
            **at_threshold(judge, labels, kinds, args.threshold),
            "pairs_per_s": len(data) / judge_s,
        },
        "judge_best_threshold": max(
            (at_threshold(judge, labels, kinds, t) for t in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)),
            key=lambda r: r["precision"] + r["recall"] - r["false_accept_refuted"],
        ),
        "cosine_baseline": {
            "embedder": "minilm",
            "auc": auc(cos, labels),
            **cos_best,
            "pairs_per_s": len(data) / cos_s,
        },
    }
    write_report(report, args.out)


if __name__ == "__main__":
    main()
