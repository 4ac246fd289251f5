"""What benchmark scripts share: the covidqa-dev index, choosing a bar, and the saved report."""

from __future__ import annotations

import json
import os
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
