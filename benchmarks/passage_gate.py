"""Would asking "does this passage answer the question?" before drafting stop withheld runs earlier?

    python benchmarks/passage_gate.py --scores /tmp/passage-gate.jsonl \\
        --runs bench-out/freeform-seed4/questions.jsonl \\
        --withheld-runs bench-out/freeform-seed4-withheld/questions.jsonl \\
        --out benchmarks/results/DATE/passage-gate.json

The answer check (``answer.answers_threshold``) asks the judge whether the verified claims
answer the question, after a draft and a citation check have been paid for. The same question
can be put to each passage's verified quote as soon as it is read: a run whose passages all
score under the threshold would abstain (or search again) without drafting. This replays that
gate over the passages stored with real ``bench --free-text`` runs: per question, the best
P(Yes) among the quotes it read (the summary where the quote failed to verify), against the
run's outcome. The threshold is not chosen here: ``benchmarks/answer_gate.py`` chose it by
cross-validation over the dev split on sentences of the same kind as these quotes (the
source sentence holding the answer against the nearest sentence of another paper).
Scores are appended to ``--scores`` as they come, so an interrupted run resumes.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from answer_gate import THRESHOLDS, _jsonl, _slug, score_all  # benchmarks/: scripts run from here
from common import write_report


def _key(question: str, statement: str) -> str:
    """Where a statement's score is kept in ``--scores``: one judge call per (question, statement)."""
    return f"passage|{_slug(question)}|{_slug(statement)}"


def passages(path: Path, kind: str) -> list[dict[str, Any]]:
    """One row per question of a run: its outcome and the statements its read passages give."""
    rows = []
    for r in _jsonl(path):
        answer = r.get("answer") or {}
        question = answer.get("question", "")
        statements = []
        for e in answer.get("evidence") or []:
            text = (e.get("quote") or e.get("summary") or "").strip()
            if text:
                statements.append(text)
        ft = r.get("free_text") or {}
        rows.append(
            {
                "kind": kind,
                "id": r["id"],
                "question": question,
                "answered": bool(r.get("answered")),
                "correct": ft.get("correct"),
                "statements": list(dict.fromkeys(statements)),
                "tokens": r.get("tokens"),
                "seconds": r.get("seconds"),
            }
        )
    return rows


def outcome(rows: list[dict[str, Any]], t: float) -> dict[str, int]:
    """What a gate at ``t`` on the best passage would have done to these runs."""

    def passes(r: dict[str, Any]) -> bool:
        return max(r["p"], default=0.0) >= t

    present = [r for r in rows if r["kind"] == "present"]
    withheld = [r for r in rows if r["kind"] == "withheld"]
    return {
        "present_correct_kept": sum(passes(r) for r in present if r["answered"] and r["correct"]),
        "present_correct": sum(1 for r in present if r["answered"] and r["correct"]),
        "present_wrong_kept": sum(passes(r) for r in present if r["answered"] and not r["correct"]),
        "present_wrong": sum(1 for r in present if r["answered"] and not r["correct"]),
        "withheld_stopped_before_draft": sum(not passes(r) for r in withheld),
        "withheld_answered_stopped": sum(not passes(r) for r in withheld if r["answered"]),
        "withheld_answered": sum(1 for r in withheld if r["answered"]),
        "withheld": len(withheld),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scores", type=Path, required=True, help="P(Yes) per statement (resumable)")
    ap.add_argument(
        "--runs", type=Path, nargs="*", default=[], help="bench --free-text rows, sources present"
    )
    ap.add_argument(
        "--withheld-runs", type=Path, nargs="*", default=[], help="rows of --withhold-sources runs"
    )
    ap.add_argument("--threshold", type=float, default=0.4, help="the bar chosen by answer_gate.py")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()

    rows = [r for p in args.runs for r in passages(p, "present")]
    rows += [r for p in args.withheld_runs for r in passages(p, "withheld")]
    items = {_key(r["question"], s): (r["question"], s) for r in rows for s in r["statements"]}
    scores = asyncio.run(score_all([(k, q, s) for k, (q, s) in items.items()], args.scores))
    for r in rows:
        r["p"] = [scores[_key(r["question"], s)] for s in r["statements"]]
    report = {
        "threshold": args.threshold,
        "at_threshold": outcome(rows, args.threshold),
        "curve": {str(t): outcome(rows, t) for t in THRESHOLDS},
        "questions": [{k: v for k, v in r.items() if k != "statements"} for r in rows],
    }
    write_report(report, args.out)


if __name__ == "__main__":
    main()
