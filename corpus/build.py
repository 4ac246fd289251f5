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
from corpus.isolate import pdf_reader
from corpus.keys import CitationKeys
from corpus.readers import SUPPORTED_SUFFIXES, read_path, source_name
from corpus.store import Library

__all__ = [
    "BuildReport",
    "Seen",
    "build_index",
    "count_documents",
    "embedding_text",
    "iter_sources",
    "open_for_build",
]

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


def _escaping_link(path: Path, top: Path) -> str | None:
    """Why a symlink found in a directory scan is not read (None: it stays inside the scan)."""
    try:
        target = path.resolve()
    except (OSError, RuntimeError):
        return "symlink loop"
    if not target.exists():
        return f"broken symlink (to {target})"
    if not target.is_relative_to(top):
        # A folder of papers from elsewhere must not pull in, say, ~/.ssh files through a link.
        return f"symlink to {target}, outside the scanned folder {top}; name it explicitly to index it"
    return None


def iter_sources(sources: Sequence[Path], issues: list[ReadIssue] | None = None) -> Iterator[Path]:
    """Files to read: each file given, and supported files under each directory (sorted).

    In a directory scan, hidden files and README/SOURCE/LICENSE-style notes are left out, and so
    are symlinks that lead out of the directory or nowhere (added to ``issues`` with the reason);
    a file named explicitly is always read.
    """
    for source in sources:
        if source.is_dir():
            top = source.resolve()
            for path in sorted(source.rglob("*")):
                stem = path.name.lower().split(".")[0]
                if (
                    _suffix(path) not in SUPPORTED_SUFFIXES
                    or path.name.startswith(".")
                    or stem in _NOT_PAPERS
                ):
                    continue
                if path.is_symlink() and (reason := _escaping_link(path, top)) is not None:
                    if issues is not None:
                        issues.append(ReadIssue(source=source_name(path), reason=reason))
                    continue
                if path.is_file():
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
            except (OSError, EOFError):  # a truncated .gz: the reader reports it
                total += 1
        else:
            total += 1
    return total


class Seen:
    """What one build has accepted so far, and the duplicate rule it applies with the library.

    Shared with the merge of a sharded build (:mod:`corpus.shards`), so both skip exactly the
    same documents and a sharded build equals a serial one.
    """

    def __init__(self) -> None:
        self.hashes: set[str] = set()
        self.ids: set[str] = set()
        self.dois: set[str] = set()

    def duplicate(self, library: Library, paper: Paper, *, record: bool) -> str | None:
        """Why ``paper`` is not added (None: it is). ``record``: it came from a JSONL corpus."""
        reason = library.duplicate_of(paper, by_doi=not record)
        if reason is None and not record and paper.doi and paper.doi in self.dois:
            reason = f"duplicate DOI {paper.doi} in this build"
        if reason is None and (paper.content_hash in self.hashes or paper.doc_id in self.ids):
            reason = "duplicate of another document in this build"
        return reason

    def add(self, paper: Paper, *, record: bool) -> None:
        self.hashes.add(paper.content_hash)
        self.ids.add(paper.doc_id)
        if paper.doi and not record:
            self.dois.add(paper.doi)


def open_for_build(root: Path, settings: Settings, embedder: Embedder) -> Library:
    """The index at ``root``, created with ``settings``' chunking and index kind if absent."""
    return Library.open_or_create(
        root,
        embedder=embedder.name,
        dim=embedder.dim,
        chunk_chars=settings.chunking.chunk_chars,
        overlap_chars=settings.chunking.overlap_chars,
        index_kind=settings.retrieval.index_kind,
        index_params=settings.retrieval.index_params(),
        lock_timeout=settings.retrieval.index_lock_timeout_s,
    )


def embedding_text(paper: Paper, chunk: Chunk) -> str:
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
    """Index ``sources`` into ``root``, holding its write lock (see :mod:`corpus.store`).

    ``library`` reuses an open library (its in-memory view is updated as batches commit).
    ``paper_overrides`` maps a source path to metadata that beats what the reader found (e.g.
    the title, authors and DOI an online source gave for a downloaded PDF).
    """
    started = time.perf_counter()
    embedder = embedder or make_embedder(settings.embedding.model)
    timeout = settings.retrieval.index_lock_timeout_s
    library = library or open_for_build(root, settings, embedder)
    # The whole build holds the write lock: its duplicate checks and citation keys are decided
    # against the library as it is under the lock, so builds running at once over overlapping
    # sources add each document once, as one build after the other would.
    # PDFs are read in a worker process under settings.index's time and memory limits.
    with library.writing(timeout), pdf_reader(settings.index) as read_pdf:
        report = _build(sources, library, settings, embedder, batch_docs, progress, paper_overrides, read_pdf)
    report.seconds = time.perf_counter() - started
    return report


def _build(
    sources: Sequence[Path],
    library: Library,
    settings: Settings,
    embedder: Embedder,
    batch_docs: int,
    progress: Progress | None,
    paper_overrides: dict[str, dict[str, object]] | None,
    read_pdf: Callable[[Path], Document | ReadIssue] | None = None,
) -> BuildReport:
    chunking = settings.chunking
    keys = CitationKeys(library.keys)
    report = BuildReport()
    pending: list[Document] = []
    seen = Seen()

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
                texts.append(embedding_text(doc.paper, chunk))
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

    for path in iter_sources(sources, report.failed):
        for result in read_path(path, pdf_reader=read_pdf):
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
            reason = seen.duplicate(library, paper, record=record)
            if reason is not None:
                report.skipped.append(
                    ReadIssue(source=paper.source + f" [{paper.doc_id}]", reason=reason, fatal=False)
                )
                if progress:
                    progress(1, 0)
                continue
            seen.add(paper, record=record)
            pending.append(result)
            if len(pending) >= batch_docs:
                flush()
    flush()
    library.save_index()
    return report
