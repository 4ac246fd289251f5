"""The citation judge on the sentence windows, replayed over the claims stored runs delivered.

    python benchmarks/judge_windows_replay.py benchmarks/results/DATE/covidqa-freeform-*/questions.jsonl \\
        --out benchmarks/results/DATE/judge-windows-replay.json

For every delivered free-form claim the citation check passed on the judge's word (method
``judge`` or ``judge+quote``), the check's own prompt (:func:`agent.core.prompts.judge_messages`)
is asked again twice: about the whole cited passage and about the runs of its sentences nearest
the claim (a verified quote is judged as it was, alone), the two views ``answer.judge_view``
chooses between. Each claim is listed with the P(Yes) the run stored, both P(Yes) now, and how
the answer was graded, so what either view alone, or both together (the default), would have
dropped can be read against correctness, free of the drift that changes a whole run's
summaries between machines. Claims repeated across runs are asked once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

from common import write_report  # benchmarks/common.py: scripts run from this folder

from agent.core.prompts import judge_messages
from agent.core.settings import load_settings
from agent.core.words import support_windows
from agent.llm.factory import resolve_role_llms


async def replay(paths: list[Path]) -> list[dict[str, Any]]:
    settings = load_settings()
    judge = resolve_role_llms(settings)["judge"]
    out: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for path in paths:
        for line in path.read_text().splitlines():
            row = json.loads(line)
            answer = row.get("answer") or {}
            if not row.get("answered") or not answer.get("verification"):
                continue
            evidence = {e["key"]: e for e in answer.get("evidence") or []}
            for claim in answer["verification"]["claims"]:
                for check in claim["checks"]:
                    method = check.get("method")
                    if check["verdict"] != "supported" or method not in ("judge", "judge+quote"):
                        continue
                    if (claim["text"], check["key"]) in seen or check["key"] not in evidence:
                        continue
                    seen.add((claim["text"], check["key"]))
                    text = evidence[check["key"]]["text"] if method == "judge" else claim.get("quote", "")
                    best = 0.0
                    for window in support_windows(text, claim["text"]) if method == "judge" else [text]:
                        score = await judge.score_yes(judge_messages(claim["text"], window))
                        best = max(best, score.p_yes)
                    whole = best  # a verified quote was judged alone either way
                    if method == "judge":  # the whole passage
                        whole = (await judge.score_yes(judge_messages(claim["text"], text))).p_yes
                    grade = row.get("free_text") or {}
                    out.append(
                        {
                            "run": path.parent.name,
                            "id": row["id"],
                            "method": method,
                            "p_stored": round(check.get("p_support") or 0.0, 3),
                            "p_whole": round(whole, 3),
                            "p_windows": round(best, 3),
                            "kept_whole": whole >= settings.evidence.judge_threshold,
                            "kept": best >= settings.evidence.judge_threshold,
                            "judge_correct": grade.get("correct"),
                            "containment": grade.get("containment"),
                            "claim": claim["text"],
                        }
                    )
                    print(json.dumps(out[-1]), flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rows", type=Path, nargs="+", help="bench --free-text questions.jsonl files")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    claims = asyncio.run(replay(args.rows))
    report = {
        "claims": len(claims),
        "kept_windows_only": sum(c["kept"] and not c["kept_whole"] for c in claims),
        "kept_whole_only": sum(c["kept_whole"] and not c["kept"] for c in claims),
        "kept_both": sum(c["kept_whole"] and c["kept"] for c in claims),
        "rows": claims,
    }
    write_report(report, args.out)


if __name__ == "__main__":
    main()
