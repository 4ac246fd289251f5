"""Saved prompt states in the local provider: seconds per question with and without them.

    python benchmarks/prefix_states.py --questions 4 --out benchmarks/results/DATE/prefix-states.json

A free-form run calls the local model in a fixed order per question: a summary of each passage
read, an answer draft, then judge calls on the claims. llama.cpp keeps one KV cache, so every
change of system prompt used to evaluate that prompt again. ``LoadedModel.saved`` keeps the
state after each system prompt's last call. This script replays that call order on COVID-QA
questions (the project's own prompts: ``summary_messages`` over the two best chunks of the
source paper, ``answer_messages`` over their summaries, ``judge_messages`` on the draft's
summary line against each chunk), once with the saved states off (``MAX_SAVED_PREFIXES = 0``, the
live cache only) and once on, each over the same questions in a row, as a run meets them (a role's
saved state serves the next question). It reports the median seconds per question after the
first, the prompt tokens reused, and whether every reply and judge score matched between the two.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import time
from pathlib import Path
from typing import Any

from common import DATA, covidqa_searcher, write_report

import agent.llm.local as local
from agent.core.prompts import answer_messages, judge_messages, summary_messages
from agent.core.settings import load_settings
from agent.llm import switch
from agent.llm.local import LocalLLM
from corpus.search import Filters
from tools.gather_evidence import SUMMARY_SCHEMA

ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"summary": {"type": "string", "maxLength": 300}},
    "required": ["summary"],
}


async def one_question(llm: LocalLLM, question: str, chunks: list[str]) -> dict[str, Any]:
    """The calls of one answered free-form question, in a run's order; replies and token counts."""
    replies: list[Any] = []
    prompt = cached = 0
    t0 = time.perf_counter()
    evidence = []
    for i, text in enumerate(chunks):
        c = await llm.complete(
            summary_messages(question, f"Paper{i}", None, text), json_schema=SUMMARY_SCHEMA, max_tokens=400
        )
        replies.append(c.text)
        prompt, cached = prompt + c.usage.prompt_tokens, cached + c.usage.cached_prompt_tokens
        evidence.append((f"Paper{i}", str(c.json().get("summary", "")), text[:900]))
    a = await llm.complete(answer_messages(question, evidence), json_schema=ANSWER_SCHEMA, max_tokens=200)
    replies.append(a.text)
    prompt, cached = prompt + a.usage.prompt_tokens, cached + a.usage.cached_prompt_tokens
    line = str(a.json().get("summary", "")) or question
    for text in chunks:
        s = await llm.score_yes(judge_messages(line, text))
        replies.append(round(s.p_yes, 3))
        prompt, cached = prompt + s.usage.prompt_tokens, cached + s.usage.cached_prompt_tokens
    return {"seconds": time.perf_counter() - t0, "replies": replies, "prompt": prompt, "cached": cached}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    settings = load_settings(environ={})
    searcher = covidqa_searcher(args.work)
    qs = [json.loads(line) for line in (DATA / "sets" / "covidqa-dev.jsonl").read_text().splitlines()]
    random.Random(args.seed).shuffle(qs)
    llm = LocalLLM("qwen2.5-coder-1.5b", models_dir=settings.models_dir, n_ctx=settings.llm.local.n_ctx)
    model = llm.loaded()
    shipped = local.MAX_SAVED_PREFIXES
    work = []
    for q in qs[: args.questions]:
        hits = searcher.search(q["question"], k=2, filters=Filters(include_doc_ids=set(q["sources"])))
        work.append((q, [h.chunk.text for h in hits]))
    results: dict[str, list[dict[str, Any]]] = {}
    # the same questions in a row, as a run meets them: a role's saved state serves the next question
    for name, cap in (("off", 0), ("on", shipped)):
        local.MAX_SAVED_PREFIXES = cap
        model.saved.clear()
        model.llama.reset()
        results[name] = [await one_question(llm, q["question"], chunks) for q, chunks in work]
    local.MAX_SAVED_PREFIXES = shipped
    rows = []
    for (q, _), off, on in zip(work, results["off"], results["on"], strict=True):
        rows.append(
            {
                "id": q["id"],
                "seconds_off": round(off["seconds"], 2),
                "seconds_on": round(on["seconds"], 2),
                "prompt_tokens": on["prompt"],
                "reused_off": off["cached"],
                "reused_on": on["cached"],
                "same_replies": off["replies"][:-2] == on["replies"][:-2]
                and all(
                    abs(a - b) <= 0.01 for a, b in zip(off["replies"][-2:], on["replies"][-2:], strict=True)
                ),
            }
        )
        print(rows[-1], flush=True)
    rows = rows[1:]  # the first question starts cold either way
    off_s = statistics.median(r["seconds_off"] for r in rows)
    on_s = statistics.median(r["seconds_on"] for r in rows)
    return {
        "date": time.strftime("%Y-%m-%d"),
        "questions": len(rows),
        "median_seconds_off": round(off_s, 2),
        "median_seconds_on": round(on_s, 2),
        "ratio_on_to_off": round(on_s / off_s, 3),
        "same_replies": sum(r["same_replies"] for r in rows),
        "rows": rows,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/covidqa"), help="folder for the index")
    ap.add_argument("--questions", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    with switch.allow_model_requests():
        report = asyncio.run(run(args))
    write_report(report, args.out)


if __name__ == "__main__":
    main()
