"""Questions that point at something only their paper defines ("this disease", "these vaccines").

    python benchmarks/referent_questions.py --work /tmp/covidqa [--out FILE]

``agent.core.deixis.unnamed_work`` finds questions about one unnamed *work* ("this study", "the
authors"). COVID-QA also asks about an unnamed *topic* of the paper: "What is this disease
characterized by?", "What is a concern with these vaccines?". This finds the questions of
``sets/covidqa-dev.jsonl`` with "this" or "these" that the unnamed-work rule does not already
match, replays their first search round without a model (``coverage_gate.replay``), sources
present and withheld, and reports for each what stopping it would cost (the answering passage
would have been read, at the shipped coverage floor) and buy (the withheld question passes the
floor, so the run would read and may answer from another paper).
"""

from __future__ import annotations

import argparse
import re
import time

from common import covidqa_questions, covidqa_searcher, replay_arguments, require_covidqa, write_report
from coverage_gate import read_hit, replay

from agent.core.deixis import unnamed_work
from agent.core.settings import load_settings

_REFERENT = re.compile(r"\b(?:this|these)\b", re.IGNORECASE)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    replay_arguments(ap)
    args = ap.parse_args()
    require_covidqa()
    settings = load_settings(environ={})
    floor, read_k = settings.evidence.min_coverage, settings.evidence.summarize_k
    searcher = covidqa_searcher(args.work)
    t0 = time.perf_counter()
    rows = []
    questions = covidqa_questions()
    for q in questions:
        if not _REFERENT.search(q["question"]) or unnamed_work(q["question"]):
            continue
        present = replay(searcher, q, set(), settings)
        withheld = replay(searcher, q, set(q["sources"]), settings)
        rows.append(
            {
                "id": q["id"],
                "question": " ".join(q["question"].split()),
                "present_passes_floor": any(c >= floor for r in present for _, _, c in r),
                "answering_passage_read": read_hit(q, present, floor, read_k),
                "withheld_passes_floor": any(c >= floor for r in withheld for _, _, c in r),
            }
        )
    report = {
        "date": time.strftime("%Y-%m-%d"),
        "questions": len(questions),
        "referent_questions": len(rows),
        "answering_passage_read": sum(r["answering_passage_read"] for r in rows),
        "withheld_pass_floor": sum(r["withheld_passes_floor"] for r in rows),
        "seconds": round(time.perf_counter() - t0, 1),
        "rows": rows,
    }
    write_report(report, args.out)


if __name__ == "__main__":
    main()
