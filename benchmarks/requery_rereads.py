"""What a re-query buys: re-searches after a failed gate or citation check, replayed from bench rows.

    python benchmarks/requery_rereads.py benchmarks/results/*/*/questions.jsonl* \\
        --out benchmarks/results/DATE/requery-rereads.json

The rulebook searches again when the evidence gate fails or the citation check leaves no claim
standing. The new search's gather then reads its best passages. This script reads stored bench
rows (free-form and multiple choice) and counts, for every run that searched again:

* which failure sent it back (``gate``: a gather whose gate failed; ``claims``: a citation check);
* how many passages the gathers after the re-search read, and how many of those reads were of a
  chunk the run had read already. A chunk keeps one evidence key per run, so the re-reads are
  the reads (``Read N new passage(s)`` in each gather's observation) minus the distinct chunks
  in the answer's evidence;
* whether a new draft followed, and how the run ended (answered, judge-correct for free text,
  correct for multiple choice), with the seconds spent from the re-search on.

It needs no model: it is the evidence for reading each chunk once per run
(``tools/gather_evidence.py``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from common import write_report  # benchmarks/common.py: scripts run from this folder

_READ = re.compile(r"Read (\d+) new passage")


def _rows(path: Path) -> list[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def _reads(steps: list[dict[str, Any]]) -> int:
    """Passages the gathers among ``steps`` read, from their observations."""
    return sum(
        int(m.group(1))
        for s in steps
        if s.get("tool") == "gather_evidence"
        if (m := _READ.search(s.get("observation") or ""))
    )


def requery(row: dict[str, Any]) -> dict[str, Any] | None:
    """The first re-search of one run and what followed it; None when the run never searched again."""
    answer = row.get("answer") or {}
    trace = answer.get("trace") or []
    searches = [i for i, s in enumerate(trace) if s.get("tool") == "paper_search"]
    if len(searches) < 2:
        return None
    first = searches[1]
    before, after = trace[:first], trace[first:]
    kind = "claims" if any(s.get("tool") == "verify_citations" for s in before) else "gate"
    distinct = len({e.get("chunk_id") for e in answer.get("evidence") or []})
    free = row.get("free_text")
    return {
        "kind": kind,
        "answerable": bool(row.get("answerable", True)),
        "reads_after": _reads(after),
        "rereads": max(0, _reads(trace) - distinct),
        "drafted_after": any(s.get("tool") == "generate_answer" for s in after),
        "answered": bool(row.get("answered")),
        "correct": bool((free or {}).get("correct")) if free is not None else bool(row.get("correct")),
        "seconds_after": round(sum(float(s.get("seconds") or 0.0) for s in after), 1),
    }


def tally(items: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind in ("gate", "claims"):
        group = [i for i in items if i["kind"] == kind]
        rereading = [i for i in group if i["reads_after"] and i["rereads"] >= i["reads_after"]]
        out[kind] = {
            "requeries": len(group),
            "of_which_withheld": sum(not i["answerable"] for i in group),
            "read_only_chunks_read_before": len(rereading),
            "read_something_new": sum(i["reads_after"] > i["rereads"] for i in group),
            "read_nothing": sum(not i["reads_after"] for i in group),
            "drafted_after": sum(i["drafted_after"] for i in group),
            "answered": dict(
                Counter("present" if i["answerable"] else "withheld" for i in group if i["answered"])
            ),
            "answered_correct": sum(i["answered"] and i["correct"] for i in group),
            # answers drafted from re-read passages: what reading each chunk once could lose
            "answered_from_rereads": sum(i["answered"] and i["drafted_after"] for i in rereading),
            "correct_from_rereads": sum(
                i["answered"] and i["drafted_after"] and i["correct"] for i in rereading
            ),
            "seconds_after": round(sum(i["seconds_after"] for i in group), 1),
            "seconds_after_only_rereads": round(sum(i["seconds_after"] for i in rereading), 1),
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path, help="questions.jsonl(.gz) files of bench runs")
    ap.add_argument("--system", default="scholarloop")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    report: dict[str, Any] = {"runs": {}}
    everything: list[dict[str, Any]] = []
    for path in args.runs:
        items = [
            item for r in _rows(path) if r.get("system") == args.system if (item := requery(r)) is not None
        ]
        everything += items
        report["runs"][str(path)] = tally(items)
    report["total"] = tally(everything)
    write_report(report, args.out)


if __name__ == "__main__":
    main()
