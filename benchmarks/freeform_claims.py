"""What free-form answers are made of: claims per answer, papers per answer, decomposition, cost.

    python benchmarks/freeform_claims.py bench-out/freeform-seed4/questions.jsonl \\
        --out benchmarks/results/DATE/freeform-claims.json

``scholarloop bench --free-text`` grades each answer (judge, token F1, containment, the right
paper). This script reads the same rows for what the report does not show: how many verified
claims each delivered answer holds and from how many papers, how often the one-line direct answer
was shown, how many drafted claims the decomposition split or the fragment mending dropped
(from the tool observations in each trace), and the cost of an answered question against one that
ended in "insufficient evidence" (the issue's ≤ 1.5× target). With ``--withheld`` (the same
questions run with ``--withhold-sources``) it replays stricter abstention gates on both runs.
With ``--grade-withheld ROWS… --set SET`` it asks the benchmark's correctness judge whether
each answer a withheld run gave anyway states the withheld paper's reference, as
``scholarloop bench`` now does itself (``states_withheld``), for rows stored before it did.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from common import write_report  # benchmarks/common.py: scripts run from this folder

from agent.bench.freetext import JUDGE_THRESHOLD, judge_p_yes
from agent.bench.grading import load_set
from tools.verify_citations import describes_source

_DRAFTED = re.compile(r"Drafted (\d+) claim\(s\)(?: \(from (\d+) drafted\))?")
_FRAGMENTS = re.compile(r"(\d+) sentence fragment\(s\) dropped")


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 1) if values else None


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    answered = [r for r in rows if r.get("answered")]
    unanswered = [r for r in rows if not r.get("answered")]
    claims = [len((r.get("answer") or {}).get("claims") or []) for r in answered]
    papers = [
        len({k.split(" ")[0] for c in (r["answer"].get("claims") or []) for k in c.get("citations", [])})
        for r in answered
    ]
    drafts = split = fragments = 0
    for r in rows:
        for step in (r.get("answer") or {}).get("trace") or []:
            if step.get("tool") != "generate_answer":
                continue
            obs = step.get("observation") or ""
            if m := _DRAFTED.search(obs):
                drafts += 1
                split += int(m.group(2) or m.group(1)) != int(m.group(1))
            if m := _FRAGMENTS.search(obs):
                fragments += int(m.group(1))
    tokens_a = [float(r["tokens"]) for r in answered]
    tokens_u = [float(r["tokens"]) for r in unanswered]
    ta, tu = _median(tokens_a), _median(tokens_u)
    return {
        "questions": len(rows),
        "answered": len(answered),
        "judge_correct_of_answered": sum(bool((r.get("free_text") or {}).get("correct")) for r in answered),
        "containment_of_answered": sum(bool((r.get("free_text") or {}).get("containment")) for r in answered),
        "right_paper_of_answered": sum(bool((r.get("free_text") or {}).get("right_paper")) for r in answered),
        "fabricated": sum(int(r.get("fabricated") or 0) for r in rows),
        "faithfulness_mean": round(statistics.mean(float(r.get("faithfulness") or 0.0) for r in answered), 3)
        if answered
        else None,
        "claims_per_answer": dict(sorted(Counter(claims).items())),
        "answers_with_several_claims": sum(n >= 2 for n in claims),
        "answers_citing_several_papers": sum(n >= 2 for n in papers),
        "direct_answer_shown": sum(bool((r.get("answer") or {}).get("direct")) for r in answered),
        # "The passage discusses X": verify_citations drops these (method describes-source)
        "answers_with_a_claim_describing_its_source": sum(
            any(describes_source(c.get("text", "")) for c in r["answer"].get("claims") or [])
            for r in answered
        ),
        "rewrites_for_claims_describing_their_source": sum(
            "says what the passage is about" in str((s.get("arguments") or {}).get("feedback", ""))
            for r in rows
            for s in (r.get("answer") or {}).get("trace") or []
        ),
        "drafts": drafts,
        "drafts_split_or_merged": split,
        "fragments_dropped": fragments,
        "median_seconds": _median([float(r["seconds"]) for r in rows]),
        "median_seconds_answered": _median([float(r["seconds"]) for r in answered]),
        "median_seconds_unanswered": _median([float(r["seconds"]) for r in unanswered]),
        "median_tokens": _median([float(r["tokens"]) for r in rows]),
        "median_tokens_answered": ta,
        "median_tokens_unanswered": tu,
        "unanswered_to_answered_tokens": round(tu / ta, 2) if ta and tu else None,
    }


def _best_score(row: dict[str, Any]) -> int:
    return max((int(e.get("score") or 0) for e in (row.get("answer") or {}).get("evidence") or []), default=0)


def _weakest_support(row: dict[str, Any]) -> float:
    """The lowest judge P(support) among the delivered claims' accepted citations (1.0 if quoted)."""
    ps = [
        float(check.get("p_support") or 0.0)
        for c in (row.get("answer") or {}).get("claims") or []
        for check in c.get("checks") or []
        if check.get("verdict") == "supported"
    ]
    return min(ps, default=0.0)


def gate_curve(present: list[dict[str, Any]], withheld: list[dict[str, Any]]) -> dict[str, Any]:
    """Stricter gates replayed on stored runs: answer only if the run answered *and* the gate passes.

    Only a stricter gate can be replayed (a question the run did not answer stays unanswered), so
    the curve starts at the shipped setting and moves towards more abstention.
    """

    def point(passes: Any) -> dict[str, Any]:
        ok = [r for r in present if r.get("answered") and passes(r)]
        wrong = [r for r in withheld if r.get("answered") and passes(r)]
        return {
            "answered_present": len(ok),
            "correct_present": sum(bool((r.get("free_text") or {}).get("correct")) for r in ok),
            "abstained_withheld": len(withheld) - len(wrong),
        }

    return {
        "present": len(present),
        "withheld": len(withheld),
        "best_summary_score": {s: point(lambda r, s=s: _best_score(r) >= s) for s in range(5, 11)},
        "weakest_claim_support": {
            t: point(lambda r, t=t: _weakest_support(r) >= t) for t in (0.8, 0.85, 0.9, 0.95, 0.98)
        },
    }


async def grade_withheld(paths: list[Path], set_path: Path, system: str) -> dict[str, Any]:
    """Each withheld run's answers against the withheld reference, one judge call per answer."""
    from agent.core.settings import load_settings
    from agent.llm.factory import resolve_role_llms

    judge = resolve_role_llms(load_settings())["judge"]
    ideal = {q.id: q.ideal for q in load_set(set_path)}
    out: dict[str, Any] = {}
    for path in paths:
        graded = []
        for row in _rows(path, system):
            free = row["free_text"]
            if not free.get("answered") or not ideal.get(row["id"]):
                continue
            p = free.get("judge_p_yes") if free.get("states_withheld") is not None else None
            if p is None:
                p = await judge_p_yes(judge, row["answer"]["question"], ideal[row["id"]], free["text"])
            graded.append(
                {
                    "id": row["id"],
                    "p_yes": round(p, 3),
                    "states_reference": p >= JUDGE_THRESHOLD,
                    "answer": free["text"],
                    "reference": ideal[row["id"]],
                }
            )
        out[str(path)] = {
            "answered": len(graded),
            "stating_reference": sum(g["states_reference"] for g in graded),
            "answers": graded,
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path, help="questions.jsonl files of free-form bench runs")
    ap.add_argument("--system", default="scholarloop")
    ap.add_argument(
        "--withheld", type=Path, default=None, help="the same questions run with --withhold-sources"
    )
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--png", type=Path, default=None, help="with --withheld: the abstention trade-off")
    ap.add_argument(
        "--grade-withheld",
        nargs="+",
        type=Path,
        default=[],
        help="withheld runs whose answers are judged against the withheld reference (needs --set)",
    )
    ap.add_argument("--set", type=Path, default=None, help="the question set the runs asked")
    args = ap.parse_args()
    if args.grade_withheld and args.set is None:
        ap.error("--grade-withheld needs --set")
    report: dict[str, Any] = {}
    for path in [*args.runs, *([args.withheld] if args.withheld else [])]:
        report[str(path)] = summarise(_rows(path, args.system))
    if args.withheld:
        report["gate_curve"] = curve = gate_curve(
            _rows(args.runs[0], args.system), _rows(args.withheld, args.system)
        )
        if args.png:
            plot(curve, args.png)
    if args.grade_withheld:
        report["withheld_answers"] = asyncio.run(grade_withheld(args.grade_withheld, args.set, args.system))
    write_report(report, args.out)


def plot(curve: dict[str, Any], png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4.5))
    for name, label in (
        ("best_summary_score", "best summary score ≥ s"),
        ("weakest_claim_support", "weakest claim P ≥ t"),
    ):
        points = curve[name]
        xs = [p["correct_present"] / max(curve["present"], 1) for p in points.values()]
        ys = [p["abstained_withheld"] / max(curve["withheld"], 1) for p in points.values()]
        ax.plot(xs, ys, marker="o", label=label)
        for (setting, _), x, y in zip(points.items(), xs, ys, strict=True):
            ax.annotate(str(setting), (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.axhline(0.9, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("judge-correct answers, sources present (share of questions)")
    ax.set_ylabel("abstained, sources withheld (share of questions)")
    ax.set_title("COVID-QA free-form: stricter gates replayed on both runs")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=120)


def _rows(path: Path, system: str) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if r.get("system") == system and r.get("free_text") is not None]


if __name__ == "__main__":
    main()
