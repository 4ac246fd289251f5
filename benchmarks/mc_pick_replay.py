"""Ask the answer model for its pick where a stored multiple-choice run never asked for it.

    python benchmarks/mc_pick_replay.py results/2026-12-04/litqa2-train-all/questions.jsonl.gz \\
        --floor 0.4 --out results/2026-12-04/picks-under-threshold.json

A ``hybrid`` run asks the answer model for its letter only when the judge's best option clears
``mc_threshold`` with a small lead. Whether the pick could also rescue a best option *under* the
threshold (the biggest loss on the LitQA2 train split) cannot be replayed from those rows, so this
script asks for it: for every stored answer whose best option scored between ``--floor`` and the
run's threshold, it rebuilds the run's state (question, options in the run's order, the passages
it read) and calls the same ``ask_pick`` the tool calls, with the offline default model. The
picks it writes are read by ``mc_cv.py --picks``.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
from pathlib import Path
from typing import Any

from common import write_report  # benchmarks/common.py: scripts run from this folder

from agent.core.evidence import offered_evidence
from agent.core.settings import load_settings
from agent.core.state import Evidence, RunState
from agent.llm.factory import resolve_role_llms
from tools.base import ToolContext
from tools.generate_answer import ask_pick, polarity_options


def _rows(path: Path) -> list[dict[str, Any]]:
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return [json.loads(line) for line in raw.decode().splitlines() if line.strip()]


def _best(scores: dict[str, dict[str, float]]) -> float:
    return max((p for per in scores.values() for p in per.values()), default=0.0)


async def replay(rows: list[dict[str, Any]], floor: float, ceiling: float) -> dict[str, str]:
    settings = load_settings()
    llms = resolve_role_llms(settings)
    picks: dict[str, str] = {}
    for row in rows:
        answer = row.get("answer") or {}
        record = answer.get("option_scores") or {}
        options = row.get("options") or []
        if row.get("system") != "scholarloop" or record.get("pick") or polarity_options(options):
            continue
        if not floor <= _best(record.get("scores") or {}) < ceiling:
            continue
        state = RunState(question=answer.get("question", ""), options=options)
        for e in answer.get("evidence") or []:
            evidence = Evidence.model_validate(e)
            state.evidence[evidence.key] = evidence
        offered = offered_evidence(state, min_score=settings.evidence.min_score, k=settings.answer.evidence_k)
        if not offered:
            continue
        ctx = ToolContext(state=state, settings=settings, llms=llms)
        picks[row["id"]] = (await ask_pick(ctx, offered))["choice"]
        print(f"{row['id']}: {picks[row['id']]}", flush=True)
    return picks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, help="questions.jsonl(.gz) of a scholarloop bench run")
    ap.add_argument("--floor", type=float, default=0.4)
    ap.add_argument("--ceiling", type=float, default=0.6, help="the run's mc_threshold")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    picks = asyncio.run(replay(_rows(args.run), args.floor, args.ceiling))
    write_report(
        {"run": str(args.run), "floor": args.floor, "ceiling": args.ceiling, "picks": picks}, args.out
    )


if __name__ == "__main__":
    main()
