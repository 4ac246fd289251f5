"""Questions per hour: in-process, on llama.cpp's server, and on Ray workers.

    python benchmarks/throughput.py --work /tmp/throughput --questions 4 \\
        --out benchmarks/results/DATE/throughput.json

Answers the same seeded LitQA2 questions (over an index of ``corpus/litqa2-passages.jsonl``)
with the packaged Qwen several ways and reports, for each, questions per hour, the median
seconds per question, tokens, and whether every question got the same status, choice and
claims as the in-process run:

* in-process (``local:qwen2.5-coder-1.5b``), one question at a time: the baseline;
* every role on ``python -m llama_cpp.server`` (started here on a loopback port with the same
  GGUF, context size and threads; the ``served`` preset's endpoint, ``json_mode =
  "json_object"``), with 1, 2 and 4 questions in flight (``--concurrency``);
* on a local Ray instance with 1, 2 and 4 worker actors (``--workers``), each loading the model
  once, one question at a time per worker.

llama-cpp-python's server decodes one request at a time, and this machine has 2 cores, so more
questions in flight can only overlap the client-side work (retrieval, embedding), and more Ray
workers split the same two cores; the figures say how much that is.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from common import write_report  # benchmarks/common.py: scripts run from this folder

from agent.api import aask_many
from agent.core.settings import Settings, load_settings
from agent.core.state import Answer
from agent.llm.local_models import resolve_model_path
from corpus.build import build_index

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(gguf: Path, port: int, settings: Settings, log: Path) -> subprocess.Popen[bytes]:
    local = settings.llm.local
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1"]
    cmd += ["--port", str(port), "--n_ctx", str(local.n_ctx)]
    if local.n_threads:
        cmd += ["--n_threads", str(local.n_threads)]
    proc = subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2):
                return proc
        except OSError:
            if proc.poll() is not None:
                raise SystemExit(f"llama.cpp server exited; see {log}") from None
            time.sleep(1)
    proc.kill()
    raise SystemExit(f"llama.cpp server did not start in 120 s; see {log}")


def sample(n: int, seed: int) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in (DATA / "sets" / "litqa2-train.jsonl").read_text().splitlines()]
    random.Random(seed).shuffle(rows)
    out = []
    for r in rows[:n]:
        options = [r["ideal"], *r["distractors"]]
        random.Random(r["id"]).shuffle(options)
        out.append({"id": r["id"], "question": r["question"], "options": options})
    return out


def outcome(a: Answer) -> dict[str, Any]:
    return {"status": a.status.value, "choice": a.choice, "claims": [c.text for c in a.claims]}


async def run(
    questions: list[dict[str, Any]], index: Path, settings: Settings, concurrency: int, workers: int = 0
) -> dict[str, Any]:
    t0 = time.perf_counter()
    ray: dict[str, Any] = {"ray": "local", "workers": workers} if workers else {}
    answers = await aask_many(
        questions, index=index, settings=settings, concurrency=concurrency, progress=False, **ray
    )
    wall = time.perf_counter() - t0
    return {
        "concurrency": concurrency,
        "workers": workers,
        "wall_s": round(wall, 1),
        "questions_per_hour": round(3600 * len(answers) / wall, 1),
        "median_s": round(statistics.median(a.seconds for a in answers), 1),
        "median_tokens": statistics.median(a.total_tokens for a in answers),
        "failed": sum(a.status.value == "failed" for a in answers),
        "outcomes": [outcome(a) for a in answers],
    }


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--questions", type=int, default=4)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--concurrency", type=int, nargs="*", default=[1, 2, 4])
    ap.add_argument("--workers", type=int, nargs="*", default=[1, 2, 4])
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)

    base = load_settings(environ={})
    index = args.work / "index"
    build_index([DATA / "corpus" / "litqa2-passages.jsonl"], index, base)
    questions = sample(args.questions, args.seed)
    report: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "questions": len(questions),
        "cores": os.cpu_count(),
    }

    report["in_process"] = await run(questions, index, base, 1)
    print("in-process", {k: v for k, v in report["in_process"].items() if k != "outcomes"}, flush=True)

    served = []
    if args.concurrency:
        gguf = resolve_model_path(base.llm.default.removeprefix("local:"), base.models_dir)
        port = free_port()
        server = start_server(gguf, port, base, args.work / "server.log")
        try:
            for c in args.concurrency:
                endpoint = {
                    "api_base": f"http://127.0.0.1:{port}/v1",
                    "model": "openai/qwen2.5-coder-1.5b",
                    "max_concurrency": c,
                    "json_mode": "json_object",
                }
                settings = base.with_overrides(llm={"endpoints": {"default": endpoint}, "timeout_s": 600})
                result = await run(questions, index, settings, c)
                result["same_as_in_process"] = [
                    o == i for o, i in zip(result["outcomes"], report["in_process"]["outcomes"], strict=True)
                ]
                served.append(result)
                print("served", {k: v for k, v in result.items() if k != "outcomes"}, flush=True)
        finally:
            server.terminate()
            server.wait(30)
    report["served"] = served
    on_ray = []
    for n in args.workers:
        result = await run(questions, index, base, 1, workers=n)
        result["same_as_in_process"] = [
            o == i for o, i in zip(result["outcomes"], report["in_process"]["outcomes"], strict=True)
        ]
        on_ray.append(result)
        print("ray", {k: v for k, v in result.items() if k != "outcomes"}, flush=True)
    report["ray"] = on_ray
    write_report(report, args.out)


if __name__ == "__main__":
    asyncio.run(main())
