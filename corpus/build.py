"""Build or extend an index from files, directories and JSONL corpora.

Documents are read, de-duplicated, keyed, chunked and embedded in batches. Each batch is one
commit (see :mod:`corpus.store`), so a build that is interrupted resumes where it stopped: a
rerun skips what is already committed. Every file that could not be used is reported with its
reason, and the build goes on.
"""

from __future__ import annotations

import gzip
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
from pydantic import BaseModel, Field

from agent.core.models import Chunk, Document, Paper, ReadIssue
from agent.core.settings import Settings
from corpus.chunking import chunk_document
from corpus.embeddings import Embedder, embed_in_batches, make_embedder
from corpus.readers import SUPPORTED_SUFFIXES, CitationKeys, read_path
from corpus.store import Library

__all__ = ["BuildReport", "build_index", "count_documents", "iter_sources"]

Progress = Callable[[int, int], None]  # (documents done, chunks added)


class BuildReport(BaseModel):
    indexed: int = 0
    chunks: int = 0
    skipped: list[ReadIssue] = Field(
        default_factory=list, description="Duplicates and already-indexed documents."
    )
    failed: list[ReadIssue] = Field(default_factory=list)
    warnings: list[ReadIssue] = Field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> str:
        return (
            f"indexed {self.indexed} documents ({self.chunks} chunks), skipped {len(self.skipped)}, "
            f"failed {len(self.failed)} in {self.seconds:.1f}s"
        )


def _suffix(path: Path) -> str:
    name = path.name.lower()
    return ".jsonl.gz" if name.endswith(".jsonl.gz") else path.suffix.lower()


# Files in a directory of papers that describe the directory rather than being papers.
_NOT_PAPERS = ("readme", "source", "license", "licence", "changelog", "contributing", "index")


def iter_sources(sources: Sequence[Path]) -> Iterator[Path]:
    """Files to read: each file given, and supported files under each directory (sorted).

    In a directory scan, hidden files and README/SOURCE/LICENSE-style notes are left out;
    a file named explicitly is always read.
    """
    for source in sources:
        if source.is_dir():
            for path in sorted(source.rglob("*")):
                stem = path.name.lower().split(".")[0]
                if (
                    path.is_file()
                    and _suffix(path) in SUPPORTED_SUFFIXES
                    and not path.name.startswith(".")
                    and stem not in _NOT_PAPERS
                ):
                    yield path
        else:
            yield source  # missing or unsupported files are reported by the reader


def count_documents(paths: Sequence[Path]) -> int:
    """Documents to expect (JSONL lines count one each), for the progress bar."""
    total = 0
    for path in paths:
        suffix = _suffix(path)
        if suffix in {".jsonl", ".jsonl.gz"} and path.is_file():
            opener = gzip.open if suffix == ".jsonl.gz" else open
            try:
                with opener(path, "rb") as fh:
                    total += sum(1 for line in fh if line.strip())
            except OSError:
                total += 1
        else:
            total += 1
    return total


def _embedding_text(paper: Paper, chunk: Chunk) -> str:
    # The title gives a short chunk its topic; small embedders rank noticeably better with it.
    return f"{paper.title}\n{chunk.text}" if paper.title else chunk.text


def build_index(
    sources: Sequence[Path],
    root: Path,
    settings: Settings,
    *,
    embedder: Embedder | None = None,
    batch_docs: int = 64,
    progress: Progress | None = None,
    library: Library | None = None,
    paper_overrides: dict[str, dict[str, object]] | None = None,
) -> BuildReport:
    """Index ``sources`` into ``root``.

    ``library`` reuses an open library (its in-memory view is updated as batches commit).
    ``paper_overrides`` maps a source path to metadata that beats what the reader found (e.g.
    the title, authors and DOI an online source gave for a downloaded PDF).
    """
    started = time.perf_counter()
    embedder = embedder or make_embedder(settings.embedding.model)
    chunking = settings.chunking
    library = library or Library.open_or_create(
        root,
        embedder=embedder.name,
        dim=embedder.dim,
        chunk_chars=chunking.chunk_chars,
        overlap_chars=chunking.overlap_chars,
        index_kind=settings.retrieval.index_kind,
    )
    keys = CitationKeys(library.keys)
    report = BuildReport()
    pending: list[Document] = []
    seen_hashes: set[str] = set()
    seen_ids: set[str] = set()
    seen_dois: set[str] = set()

    def flush() -> None:
        if not pending:
            return
        papers: list[Paper] = []
        chunks: list[Chunk] = []
        texts: list[str] = []
        for doc in pending:
            keys.assign(doc.paper)
            doc_chunks = chunk_document(
                doc, chunk_chars=chunking.chunk_chars, overlap_chars=chunking.overlap_chars
            )
            if not doc_chunks:
                report.failed.append(ReadIssue(source=doc.paper.source, reason="no text to chunk"))
                continue
            papers.append(doc.paper)
            for chunk in doc_chunks:
                chunks.append(chunk)
                texts.append(_embedding_text(doc.paper, chunk))
        vectors = (
            embed_in_batches(embedder, texts, settings.embedding.batch_size)
            if texts
            else np.zeros((0, embedder.dim), dtype=np.float32)
        )
        library.append(papers, chunks, vectors)
        report.indexed += len(papers)
        report.chunks += len(chunks)
        if progress:
            progress(len(pending), len(chunks))
        pending.clear()

    for path in iter_sources(sources):
        for result in read_path(path):
            if isinstance(result, ReadIssue):
                report.failed.append(result)
                if progress:
                    progress(1, 0)
                continue
            report.warnings.extend(result.warnings)
            paper = result.paper
            for field, value in (paper_overrides or {}).get(str(path), {}).items():
                if value not in (None, "", []):
                    setattr(paper, field, value)
            record = _suffix(path) in {".jsonl", ".jsonl.gz"}
            reason = library.duplicate_of(paper, by_doi=not record)
            if reason is None and not record and paper.doi and paper.doi in seen_dois:
                reason = f"duplicate DOI {paper.doi} in this build"
            if reason is None and (paper.content_hash in seen_hashes or paper.doc_id in seen_ids):
                reason = "duplicate of another document in this build"
            if reason is not None:
                report.skipped.append(
                    ReadIssue(source=paper.source + f" [{paper.doc_id}]", reason=reason, fatal=False)
                )
                if progress:
                    progress(1, 0)
                continue
            seen_hashes.add(paper.content_hash)
            seen_ids.add(paper.doc_id)
            if paper.doi and not record:
                seen_dois.add(paper.doi)
            pending.append(result)
            if len(pending) >= batch_docs:
                flush()
    flush()
    library.save_index()
    report.seconds = time.perf_counter() - started
    return report
