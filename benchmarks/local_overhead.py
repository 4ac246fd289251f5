"""Overhead of the project's local provider over raw llama-cpp-python, on the same model.

Both paths use one loaded ``Llama`` (so weights, threads and build are identical); the KV cache
is reset before every measured call so neither path profits from the other's prefix. Calls
alternate between the two paths to spread machine noise evenly. Reports median seconds per
call and the ratio (goal ≤ 1.05).

    python benchmarks/local_overhead.py [--model qwen2.5-coder-1.5b] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

from agent.core.settings import load_settings
from agent.llm.local import LocalLLM
from agent.llm.types import Message

PROMPTS = [
    "Summarise in one sentence: EGFR T790M confers resistance to gefitinib.",
    "What does a FAISS inner-product index compute?",
    "Name one function of the TP53 protein.",
    "Is osimertinib a third-generation EGFR inhibitor? Answer briefly.",
    "Give a one-line definition of BM25.",
    "What is a citation key such as Lo2020 used for?",
]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=32)
    args = parser.parse_args()

    settings = load_settings()
    llm = LocalLLM(args.model, models_dir=settings.models_dir, n_ctx=2048, max_tokens=args.max_tokens)
    loaded = llm.loaded()
    raw = loaded.llama

    def raw_call(prompt: str) -> tuple[float, int]:
        raw.reset()
        t0 = time.perf_counter()
        out = raw.create_chat_completion(
            messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": prompt}],
            max_tokens=args.max_tokens,
            temperature=0.0,
            seed=0,
        )
        return time.perf_counter() - t0, out["usage"]["completion_tokens"]

    async def layer_call(prompt: str) -> tuple[float, int]:
        raw.reset()
        t0 = time.perf_counter()
        c = await llm.complete([Message.system("Be brief."), Message.user(prompt)], temperature=0.0)
        return time.perf_counter() - t0, c.usage.completion_tokens

    await layer_call(PROMPTS[0])  # warm-up both paths once
    raw_call(PROMPTS[0])
    raw_s: list[float] = []
    layer_s: list[float] = []
    tokens = {"raw": 0, "layer": 0}
    for r in range(args.repeats):
        for i, prompt in enumerate(PROMPTS):
            if (i + r) % 2:
                s, n = raw_call(prompt)
                raw_s.append(s)
                tokens["raw"] += n
                s, n = await layer_call(prompt)
                layer_s.append(s)
                tokens["layer"] += n
            else:
                s, n = await layer_call(prompt)
                layer_s.append(s)
                tokens["layer"] += n
                s, n = raw_call(prompt)
                raw_s.append(s)
                tokens["raw"] += n
    report = {
        "model": args.model,
        "calls_per_path": len(raw_s),
        "raw_median_s": statistics.median(raw_s),
        "layer_median_s": statistics.median(layer_s),
        "ratio_layer_over_raw": statistics.median(layer_s) / statistics.median(raw_s),
        "completion_tokens": tokens,
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
