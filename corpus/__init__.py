"""The paper library: readers, chunks, embeddings, the FAISS index on disk and local search.

Above the kernel (it uses :mod:`agent.core` for settings, errors and the paper models), below
the tools. Loaded on first access, so ``import corpus`` costs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent.core.lazy import lazy_exports

if TYPE_CHECKING:
    from corpus.build import BuildReport, build_index
    from corpus.embeddings import Embedder, make_embedder
    from corpus.readers import read_path
    from corpus.search import Filters, LocalSearch
    from corpus.store import Library

__all__ = [
    "BuildReport",
    "Embedder",
    "Filters",
    "Library",
    "LocalSearch",
    "build_index",
    "make_embedder",
    "read_path",
]

_HOME = {
    "BuildReport": "corpus.build",
    "build_index": "corpus.build",
    "Embedder": "corpus.embeddings",
    "make_embedder": "corpus.embeddings",
    "read_path": "corpus.readers",
    "Filters": "corpus.search",
    "LocalSearch": "corpus.search",
    "Library": "corpus.store",
}

__getattr__, __dir__ = lazy_exports(__name__, globals(), _HOME)
