"""What benchmark scripts share: the covidqa-dev index, choosing a bar, and the saved report."""

from __future__ import annotations

import argparse
import json
import os
import random
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def covidqa_searcher(work: Path) -> Any:
    """A :class:`corpus.search.LocalSearch` over the 46 covidqa-dev papers, indexed under
    ``work`` with the default settings (built once, reused), BM25 statistics ready."""
    from agent.core.settings import load_settings
    from corpus.build import build_index
    from corpus.embeddings import make_embedder
    from corpus.search import LocalSearch
    from corpus.store import Library

    settings = load_settings(environ={})
    root = work / f"chunks{settings.chunking.chunk_chars}"
    build_index([DATA / "corpus" / "covidqa-papers-dev.jsonl.gz"], root, settings)
    lib = Library.open(root)
    searcher = LocalSearch(
        lib, make_embedder(lib.manifest.embedder), hybrid_weight=settings.retrieval.hybrid_weight
    )
    searcher.bm25()
    return searcher


def covidqa_questions(limit: int | None = None) -> list[dict[str, Any]]:
    """The covidqa-dev questions (the first ``limit`` of them, when given), as stored."""
    rows = [json.loads(line) for line in (DATA / "sets" / "covidqa-dev.jsonl").read_text().splitlines()]
    return rows[:limit] if limit else rows


def cv_folds(n: int, folds: int) -> list[list[int]]:
    """Indices 0..n-1 dealt into ``folds`` folds after one fixed shuffle, so every gate's
    cross-validation splits the same rows the same way."""
    order = list(range(n))
    random.Random(0).shuffle(order)
    return [order[i::folds] for i in range(folds)]


def highest_bar(answerable: list[float], max_loss: float) -> float:
    """The highest threshold on a score that stops at most ``max_loss`` of the answerable
    questions (those scoring under it)."""
    values = sorted(answerable)
    allowed_stops = int(max_loss * len(values))
    return values[allowed_stops] if allowed_stops < len(values) else values[-1]


def write_report(report: dict[str, Any], out: Path | None) -> None:
    text = json.dumps(report, indent=2)
    print(text)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(text)
        os.replace(tmp, out)


def replay_arguments(ap: argparse.ArgumentParser) -> None:
    """What the model-free replays of covidqa-dev (coverage_gate, unnamed_work_gate,
    coverage_floor) take: the index folder, the folds, and where the report and plot go."""
    ap.add_argument("--work", type=Path, required=True, help="folder for the index (reused if built)")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--png", type=Path, default=None)


def require_covidqa() -> None:
    """Stop with a clear message where ../shared/data is absent."""
    if not (DATA / "sets" / "covidqa-dev.jsonl").exists():
        raise SystemExit(f"needs {DATA} (../shared/data)")


def covidqa_split_arguments(ap: argparse.ArgumentParser, questions: int) -> None:
    """The covidqa-dev set and corpus, the sample and the folds every cross-validated gate takes."""
    ap.add_argument("--set", type=Path, default=DATA / "sets" / "covidqa-dev.jsonl")
    ap.add_argument("--corpus", type=Path, default=DATA / "corpus" / "covidqa-papers-dev.jsonl.gz")
    ap.add_argument("--questions", type=int, default=questions)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--folds", type=int, default=5)


def require_split(args: argparse.Namespace) -> None:
    """Stop with a clear message where ../shared/data is absent."""
    if not args.set.exists() or not args.corpus.exists():
        raise SystemExit(f"needs {args.set} and {args.corpus} (../shared/data)")


def read_scores(path: Path) -> list[dict[str, Any]]:
    """The records of a resumable scores file, skipping the torn last line a killed run leaves."""
    records: list[dict[str, Any]] = []
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return records


def hand_labels(paths: list[Path]) -> dict[tuple[str, str], bool]:
    """Hand grades (``hand-graded*.json``) keyed by question id and the answer's first 50
    characters: some stored label texts are shortened, so the whole text does not match."""
    labels = {}
    for path in paths:
        for r in json.loads(path.read_text())["rows"]:
            labels[(r["id"], r["answer"].strip()[:50])] = bool(r["hand_correct"])
    return labels
