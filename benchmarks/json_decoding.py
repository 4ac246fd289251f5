"""Greedy JSON replies from the local model: llama-cpp-python's sampler against the project's own
decoder. Same replies, fewer seconds?

    python benchmarks/json_decoding.py --questions 6 --seed 6 \\
        --out benchmarks/results/DATE/json-decoding.json

llama-cpp-python's ``create_chat_completion`` runs the JSON grammar over the whole vocabulary
for every generated token. ``agent/llm/local_decode.py`` checks the model's own best token
first and runs that pass only when the token is refused ("lazy"). Under greedy decoding both
must write the same reply. (The prompt-lookup drafts in ``json-decoding.json`` were replayed
by this script at commit a7501c1, whose decoder had them.)

The script answers covidqa-dev questions with the shipped offline pipeline (``Session.ask``) and
records every model call that asked for JSON: summaries, answer drafts, decompositions. It then
replays each question's recorded calls in their order once per mode, each question from a
cleared KV cache, so the prompt-cache reuse between consecutive calls is the same in every mode.
It reports per call the seconds of each mode and whether its reply equals the first mode's, and
per question the summed seconds, with medians and ratios against llama-cpp-python's sampler from
the same process.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path
from typing import Any

from common import DATA, write_report

from agent.api import Session
from agent.bench.grading import load_set, sample
from agent.cli.bench import default_bench_index
from agent.core.settings import load_settings
from agent.llm.local import LocalLLM
from agent.llm.types import Message
from corpus.build import build_index

CORPUS = DATA / "corpus" / "covidqa-papers-dev.jsonl.gz"


async def record(session: Session, questions: list[Any]) -> list[list[dict[str, Any]]]:
    """Answer each question; the JSON calls each one made, in order."""
    calls: list[list[dict[str, Any]]] = []
    original = LocalLLM._complete

    async def recording(self: LocalLLM, messages: list[Message], **kw: Any) -> Any:
        if kw.get("json_schema") is not None or kw.get("tools"):
            calls[-1].append({"llm": self, "messages": messages, **kw})
        return await original(self, messages, **kw)

    LocalLLM._complete = recording  # type: ignore[method-assign]
    try:
        for q in questions:
            calls.append([])
            t0 = time.perf_counter()
            answer = await session.ask(q.question)
            print(f"{q.id}: {answer.status} in {time.perf_counter() - t0:.1f} s, {len(calls[-1])} JSON calls")
    finally:
        LocalLLM._complete = original  # type: ignore[method-assign]
    return calls


MODES = {"sampler": False, "lazy": True}  # name: LocalLLM.lazy_grammar


async def replay(calls: list[dict[str, Any]], lazy: bool) -> list[dict[str, Any]]:
    """The calls of one question again, from a cleared cache."""
    out = []
    for i, call in enumerate(calls):
        llm: LocalLLM = call["llm"]
        if i == 0:
            llm.loaded().llama.reset()
        llm.lazy_grammar = lazy
        kw = {k: v for k, v in call.items() if k not in {"llm", "messages"}}
        t0 = time.perf_counter()
        c = await llm._complete(call["messages"], **kw)
        out.append(
            {
                "text": c.text,
                "seconds": time.perf_counter() - t0,
                "tokens": c.usage.completion_tokens,
                "prompt_tokens": c.usage.prompt_tokens,
            }
        )
    return out


async def run(args: argparse.Namespace) -> dict[str, Any]:
    settings = load_settings()
    index = default_bench_index(settings.home, [CORPUS])
    build_index([CORPUS], index, settings)
    session = Session(index=index, settings=settings)
    questions = sample(load_set(DATA / "sets" / "covidqa-dev.jsonl"), args.questions, args.seed)
    recorded = await record(session, questions)
    names = list(MODES)
    rows = []
    for q, calls in zip(questions, recorded, strict=True):
        if not calls:
            continue
        replies = {name: await replay(calls, lazy) for name, lazy in MODES.items()}
        base = replies[names[0]]
        per_call = []
        for i, c in enumerate(calls):
            entry: dict[str, Any] = {
                "role": "tool" if c.get("tools") else "json",
                "prompt_tokens": base[i]["prompt_tokens"],
                "tokens": base[i]["tokens"],
            }
            for name in names:
                r = replies[name][i]
                entry[f"seconds_{name}"] = round(r["seconds"], 2)
                entry[f"same_{name}"] = r["text"] == base[i]["text"]
            per_call.append(entry)
        row: dict[str, Any] = {
            "id": q.id,
            "calls": len(calls),
            "generated_tokens": sum(r["tokens"] for r in base),
        }
        for name in names:
            row[f"seconds_{name}"] = round(sum(r["seconds"] for r in replies[name]), 2)
            row[f"same_{name}"] = sum(e[f"same_{name}"] for e in per_call)
        row["per_call"] = per_call
        rows.append(row)
        print({k: v for k, v in row.items() if k != "per_call"}, flush=True)
    medians = {name: statistics.median(r[f"seconds_{name}"] for r in rows) for name in names}
    generated = sum(r["generated_tokens"] for r in rows)
    return {
        "date": time.strftime("%Y-%m-%d"),
        "questions_replayed": len(rows),
        "calls": sum(r["calls"] for r in rows),
        "generated_tokens": generated,
        "same_replies": {name: sum(r[f"same_{name}"] for r in rows) for name in names},
        "median_json_seconds_per_question": {n: round(v, 2) for n, v in medians.items()},
        "ratio_to_sampler": {n: round(v / medians[names[0]], 3) for n, v in medians.items()},
        "total_json_seconds": {n: round(sum(r[f"seconds_{n}"] for r in rows), 1) for n in names},
        "rows": rows,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--questions", type=int, default=6, help="covidqa-dev questions to answer and replay")
    p.add_argument("--seed", type=int, default=6, help="sample seed (the bench's own sampling)")
    p.add_argument("--out", type=Path, default=None, help="where to write the JSON report")
    args = p.parse_args()
    write_report(asyncio.run(run(args)), args.out)


if __name__ == "__main__":
    main()
