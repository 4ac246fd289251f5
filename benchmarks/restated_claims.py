"""Which stored free-form answers hold a verified claim that only restates its question.

``tools.verify_citations.restates_question`` has no threshold: a claim answering a wh-question
with nothing but the question's content words is removed. This replays it over every verified
claim of the stored benchmark rows (``benchmarks/results/*/covidqa-freeform-*``), counts each
distinct (question, claim) once, and says whether the answer would keep any claim, with the
answer's hand label where one exists (matched by question id and the answer's first 50
characters, ``common.hand_labels``).

    python benchmarks/restated_claims.py [--out FILE]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from common import hand_labels, write_report  # benchmarks/common.py: scripts run from this folder

from tools.verify_citations import restates_question

RESULTS = Path(__file__).resolve().parent / "results"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    labels = hand_labels(sorted(RESULTS.glob("*/hand-graded*.json")))
    seen: set[tuple[str, str]] = set()
    hits: list[dict[str, Any]] = []
    for path in sorted(RESULTS.glob("*/covidqa-freeform-*/questions.jsonl")):
        for line in path.open():
            row = json.loads(line)
            answer = row["answer"]
            claims = (answer.get("verification") or {}).get("claims", [])
            kept = [c for c in claims if c["verdict"] == "supported"]
            for claim in kept:
                key = (row["id"], claim["text"])
                if key in seen:
                    continue
                seen.add(key)
                if not restates_question(answer["question"], claim["text"]):
                    continue
                others = [c for c in kept if not restates_question(answer["question"], c["text"])]
                hits.append(
                    {
                        "run": str(path.parent.relative_to(RESULTS)),
                        "id": row["id"],
                        "withheld": "withheld" in path.parent.name,
                        "question": answer["question"],
                        "claim": claim["text"],
                        "answer_keeps_claims": len(others),
                        "hand_correct": labels.get((row["id"], answer["answer"].strip()[:50])),
                    }
                )
    write_report({"verified_claims": len(seen), "restating": len(hits), "claims": hits}, args.out)


if __name__ == "__main__":
    main()
