"""Replay the evidence of stored LitQA2 answers under each multiple-choice design.

A benchmark run keeps every answer's evidence (the original chunk text) in
``questions.jsonl``. This script re-reads the passages the answer step was offered and records,
for each question, the answer model's pick and the judge's P(support) for every option on every
passage. It then grades, on the same evidence, the designs of ``answer.mc_mode``:

* ``pick`` at several thresholds: the pick stands if its best cited passage scores at least t;
* ``judge``: the best-scored option stands if it scores at least t and leads the runner-up by m;
* ``hybrid``: ``judge``, and a smaller lead stands when the model picked the same option.

Questions from a ``--withhold-sources`` run count as unanswerable: abstaining is right.
It isolates the answer step from retrieval and needs no re-run of the agent. The measurements
are saved as they come, so an interrupted replay resumes.

    python benchmarks/mc_replay.py /tmp/bench/main/questions.jsonl --out bench-out/mc_replay.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from common import write_report  # benchmarks/common.py: scripts run from this folder

from agent.bench.grading import load_set
from agent.core.evidence import LETTERS, insufficient_letter, offered_evidence
from agent.core.prompts import judge_messages
from agent.core.settings import load_settings
from agent.core.state import Evidence, RunState
from agent.llm.factory import resolve_role_llms
from tools.base import ToolContext
from tools.generate_answer import ask_pick, option_claim

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
Decision = Callable[[dict[str, Any]], str | None]


async def measure(row: dict[str, Any], ideal: str | None, ctx: ToolContext) -> dict[str, Any]:
    """The pick and the judge's score for every (passage, option) on the row's offered evidence."""
    options: list[str] = row["options"]
    state = ctx.state
    for e in row["answer"]["evidence"]:
        ev = Evidence(**e)
        state.evidence[ev.key] = ev
    cfg = ctx.settings
    evidence = offered_evidence(state, min_score=cfg.evidence.min_score, k=cfg.answer.evidence_k)
    abstain = insufficient_letter(options)
    pick = await ask_pick(ctx, evidence) if evidence else {"choice": abstain, "citations": []}
    judge = ctx.llm("judge")
    scores: dict[str, dict[str, float]] = {}
    for e in evidence:
        scores[e.key] = {}
        for letter, text in zip(LETTERS, options, strict=False):
            if letter != abstain:
                s = await judge.score_yes(judge_messages(option_claim(state.question, text), e.text))
                scores[e.key][letter] = s.p_yes
    withheld = not row.get("answerable", True) or ideal is None
    return {
        "id": row["id"],
        "target": None if withheld else LETTERS[options.index(ideal)],  # None: abstaining is right
        "abstain": abstain,
        "pick": pick["choice"],
        "cites": [k for k in pick.get("citations", []) if k in scores],
        "scores": scores,
    }


def best_options(m: dict[str, Any]) -> list[tuple[float, str]]:
    best: dict[str, float] = {}
    for per_option in m["scores"].values():
        for letter, p in per_option.items():
            best[letter] = max(best.get(letter, 0.0), p)
    return sorted(((p, letter) for letter, p in best.items()), reverse=True)


def pick_rule(t: float) -> Decision:
    def decide(m: dict[str, Any]) -> str | None:
        if m["pick"] == m["abstain"] or not m["cites"]:
            return None
        p = max(m["scores"][k].get(m["pick"], 0.0) for k in m["cites"])
        return m["pick"] if p >= t else None

    return decide


def judge_rule(t: float, margin: float, hybrid: bool) -> Decision:
    def decide(m: dict[str, Any]) -> str | None:
        ranked = best_options(m)
        if not ranked or ranked[0][0] < t:
            return None
        p, letter = ranked[0]
        lead = p - (ranked[1][0] if len(ranked) > 1 else 0.0)
        if lead >= margin:
            return letter
        tied_best = {other for q, other in ranked if q == p}
        return m["pick"] if hybrid and m["pick"] in tied_best else None

    return decide


def grade(measured: list[dict[str, Any]], decide: Decision) -> dict[str, Any]:
    answerable = [m for m in measured if m["target"] is not None]
    unanswerable = [m for m in measured if m["target"] is None]
    answered = [(m, d) for m in answerable if (d := decide(m)) is not None]
    correct = sum(d == m["target"] for m, d in answered)
    return {
        "answerable": len(answerable),
        "accuracy": correct / len(answerable) if answerable else 0.0,
        "precision": correct / len(answered) if answered else 0.0,
        "coverage": len(answered) / len(answerable) if answerable else 0.0,
        "answered_unanswerable": sum(decide(m) is not None for m in unanswerable),
        "unanswerable": len(unanswerable),
    }


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path, help="questions.jsonl files written by scholarloop bench")
    ap.add_argument("--set", type=Path, default=DATA / "sets" / "litqa2-train.jsonl")
    ap.add_argument("--cache", type=Path, default=Path("bench-out/mc_replay.jsonl"))
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    settings = load_settings()
    llms = resolve_role_llms(settings)
    ideals = {q.id: q.ideal for q in load_set(args.set)}
    args.cache.parent.mkdir(parents=True, exist_ok=True)
    done = {}
    if args.cache.exists():
        done = {(r["run"], r["id"]): r for r in map(json.loads, args.cache.read_text().splitlines())}
    measured = []
    for run in args.runs:
        for line in run.read_text().splitlines():
            row = json.loads(line)
            if row.get("system") != "scholarloop" or row["id"] not in ideals:
                continue
            key = (str(run), row["id"])
            if key not in done:
                ctx = ToolContext(
                    state=RunState(question=row["answer"]["question"], options=row["options"]),
                    settings=settings,
                    llms=llms,
                )
                ideal = ideals[row["id"]] if row.get("answerable", True) else None
                done[key] = {"run": str(run), **await measure(row, ideal, ctx)}
                with args.cache.open("a") as fh:
                    fh.write(json.dumps(done[key]) + "\n")
            measured.append(done[key])
    rules: dict[str, Decision] = {f"pick, P >= {t}": pick_rule(t) for t in (0.5, 0.6, 0.8)}
    for t in (0.5, 0.6):
        for margin in (0.05, 0.1):
            rules[f"judge, P >= {t}, lead >= {margin}"] = judge_rule(t, margin, hybrid=False)
            rules[f"hybrid, P >= {t}, lead >= {margin}"] = judge_rule(t, margin, hybrid=True)
    write_report(
        {
            "questions": len(measured),
            "runs": [str(r) for r in args.runs],
            "rules": {name: grade(measured, rule) for name, rule in rules.items()},
        },
        args.out,
    )


if __name__ == "__main__":
    asyncio.run(main())
