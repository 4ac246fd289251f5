"""The on-disk library: papers, chunks, raw vectors, a FAISS index and a manifest.

Layout of an index directory (file names are fixed; names from outside never choose a path)::

    manifest.json   format version, embedder, dimension, chunking, counts and byte lengths
    papers.jsonl    one Paper a line
    chunks.jsonl    one Chunk a line; line i is vector row i
    vectors.f32     raw float32 rows, the source of truth for the index
    faiss.index     derived; rebuilt from vectors.f32 whenever it is out of step

Commit protocol: append to the three data files, fsync, then replace ``manifest.json``
atomically. The manifest records how many bytes of each file are committed, so bytes a crash
left after the last commit are cut off on the next open. A build that is interrupted resumes
from its last committed batch and never sees a half-written one.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
from pydantic import BaseModel, Field

from agent.core.errors import CorpusError
from agent.core.models import Chunk, Paper
from corpus.index import IndexKind, VectorIndex

__all__ = ["FORMAT_VERSION", "Library", "Manifest", "write_atomic"]

FORMAT_VERSION = 1
_FILES = ("papers.jsonl", "chunks.jsonl", "vectors.f32")


class Manifest(BaseModel):
    format_version: int = FORMAT_VERSION
    embedder: str
    dim: int
    chunk_chars: int
    overlap_chars: int
    index_kind: IndexKind = "flat"
    n_papers: int = 0
    n_chunks: int = 0
    bytes: dict[str, int] = Field(default_factory=lambda: dict.fromkeys(_FILES, 0))
    created: float = Field(default_factory=time.time)
    updated: float = Field(default_factory=time.time)


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` all at once: a crash leaves the old file or the new one."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _read_lines(path: Path, committed: int) -> list[str]:
    if committed == 0:
        return []
    with path.open("rb") as fh:
        data = fh.read(committed)
    if len(data) != committed:
        raise CorpusError(f"{path} is shorter than its manifest says ({len(data)} < {committed} bytes)")
    return data.decode("utf-8").splitlines()


class Library:
    """Papers, chunks and vectors of one index directory, loaded in memory for search."""

    def __init__(self, root: Path, manifest: Manifest) -> None:
        self.root = root
        self.manifest = manifest
        self.papers: list[Paper] = []
        self.chunks: list[Chunk] = []
        self.vectors = np.zeros((0, manifest.dim), dtype=np.float32)
        self._index: VectorIndex | None = None
        self._by_id: dict[str, Paper] = {}
        self._hashes: set[str] = set()
        self._by_doi: dict[str, str] = {}

    # ---- opening -------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        root: Path,
        *,
        embedder: str | None = None,
        chunk_chars: int | None = None,
        overlap_chars: int | None = None,
    ) -> Library:
        """Open an existing index; expected parameters that differ are a clear error."""
        path = root / "manifest.json"
        if not path.exists():
            raise CorpusError(
                f"no index at {root} (missing manifest.json); build one with: scholarloop index build"
            )
        try:
            manifest = Manifest.model_validate_json(path.read_bytes())
        except ValueError as exc:
            raise CorpusError(f"{path} is not a valid manifest: {exc}") from exc
        if manifest.format_version != FORMAT_VERSION:
            raise CorpusError(
                f"index at {root} has format version {manifest.format_version}; this scholarloop reads "
                f"version {FORMAT_VERSION}: rebuild it"
            )
        expected = {"embedder": embedder, "chunk_chars": chunk_chars, "overlap_chars": overlap_chars}
        for field, want in expected.items():
            have = getattr(manifest, field)
            if want is not None and want != have:
                raise CorpusError(
                    f"index at {root} was built with {field}={have!r} but the settings ask for {want!r}: "
                    f"use the same setting, or rebuild the index into a new directory"
                )
        lib = cls(root, manifest)
        lib._load()
        return lib

    @classmethod
    def open_or_create(
        cls,
        root: Path,
        *,
        embedder: str,
        dim: int,
        chunk_chars: int,
        overlap_chars: int,
        index_kind: IndexKind = "flat",
    ) -> Library:
        if (root / "manifest.json").exists():
            lib = cls.open(root, embedder=embedder, chunk_chars=chunk_chars, overlap_chars=overlap_chars)
            if lib.manifest.dim != dim:
                raise CorpusError(f"index at {root} has dimension {lib.manifest.dim}, embedder gives {dim}")
            return lib
        root.mkdir(parents=True, exist_ok=True)
        manifest = Manifest(
            embedder=embedder,
            dim=dim,
            chunk_chars=chunk_chars,
            overlap_chars=overlap_chars,
            index_kind=index_kind,
        )
        for name in _FILES:
            (root / name).write_bytes(b"")
        write_atomic(root / "manifest.json", manifest.model_dump_json(indent=2).encode())
        return cls(root, manifest)

    def _load(self) -> None:
        m = self.manifest
        paper_lines = _read_lines(self.root / "papers.jsonl", m.bytes["papers.jsonl"])
        chunk_lines = _read_lines(self.root / "chunks.jsonl", m.bytes["chunks.jsonl"])
        if len(paper_lines) != m.n_papers or len(chunk_lines) != m.n_chunks:
            raise CorpusError(f"index at {self.root} is inconsistent with its manifest; rebuild it")
        self.papers = [Paper.model_validate_json(line) for line in paper_lines]
        self.chunks = [Chunk.model_validate_json(line) for line in chunk_lines]
        raw = np.fromfile(self.root / "vectors.f32", dtype=np.float32, count=m.n_chunks * m.dim)
        if raw.size != m.n_chunks * m.dim:
            raise CorpusError(f"{self.root / 'vectors.f32'} is truncated; rebuild the index")
        self.vectors = raw.reshape(m.n_chunks, m.dim)
        for paper in self.papers:
            self._remember(paper)

    def _remember(self, paper: Paper) -> None:
        self._by_id[paper.doc_id] = paper
        if paper.content_hash:
            self._hashes.add(paper.content_hash)
        if paper.doi:
            self._by_doi.setdefault(paper.doi.lower(), paper.doc_id)

    # ---- queries -------------------------------------------------------------------------

    def paper(self, doc_id: str) -> Paper:
        return self._by_id[doc_id]

    def doc_for_doi(self, doi: str) -> str | None:
        """The doc id of the first paper with this DOI (case-insensitive), if any."""
        return self._by_doi.get(doi.lower())

    @property
    def keys(self) -> set[str]:
        return {p.key for p in self.papers}

    def duplicate_of(self, paper: Paper, *, by_doi: bool = True) -> str | None:
        """Why ``paper`` is already here (same doc id, content or DOI), or None.

        ``by_doi=False`` for corpus records: several passages of one paper share its DOI.
        """
        if paper.doc_id in self._by_id:
            return f"already indexed (doc_id {paper.doc_id})"
        if paper.content_hash and paper.content_hash in self._hashes:
            return "duplicate content (same text already indexed)"
        if by_doi and paper.doi and paper.doi.lower() in self._by_doi:
            return f"duplicate DOI {paper.doi}"
        return None

    def index(self) -> VectorIndex:
        """The FAISS index, loaded if in step with the vectors, otherwise rebuilt and saved."""
        if self._index is not None and self._index.ntotal == len(self.chunks):
            return self._index
        path = self.root / "faiss.index"
        kind = self.manifest.index_kind
        index: VectorIndex | None = None
        if path.exists():
            try:
                index = VectorIndex.load(path, kind, self.manifest.dim)
            except RuntimeError:
                index = None
        if index is None or index.ntotal != len(self.chunks):
            index = VectorIndex(self.manifest.dim, kind).build(self.vectors)
            if len(self.chunks):
                index.save(path)
        self._index = index
        return index

    # ---- writing -------------------------------------------------------------------------

    def append(self, papers: Sequence[Paper], chunks: Sequence[Chunk], vectors: np.ndarray) -> None:
        """Commit one batch: data files first, then the manifest (the commit point)."""
        if len(chunks) != len(vectors):
            raise CorpusError(f"{len(chunks)} chunks but {len(vectors)} vectors")
        vectors = np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1, self.manifest.dim)
        m = self.manifest
        payloads = {
            "papers.jsonl": "".join(p.model_dump_json() + "\n" for p in papers).encode(),
            "chunks.jsonl": "".join(c.model_dump_json() + "\n" for c in chunks).encode(),
            "vectors.f32": vectors.tobytes(),
        }
        new_bytes = dict(m.bytes)
        for name, payload in payloads.items():
            path = self.root / name
            with path.open("r+b" if path.exists() else "wb") as fh:
                fh.truncate(m.bytes[name])  # drop anything a crash left after the last commit
                fh.seek(m.bytes[name])
                fh.write(payload)
                fh.flush()
                os.fsync(fh.fileno())
            new_bytes[name] = m.bytes[name] + len(payload)
        updated = m.model_copy(
            update={
                "n_papers": m.n_papers + len(papers),
                "n_chunks": m.n_chunks + len(chunks),
                "bytes": new_bytes,
                "updated": time.time(),
            }
        )
        write_atomic(self.root / "manifest.json", updated.model_dump_json(indent=2).encode())
        self.manifest = updated
        self.papers.extend(papers)
        self.chunks.extend(chunks)
        self.vectors = np.concatenate([self.vectors, vectors]) if len(self.vectors) else vectors
        for paper in papers:
            self._remember(paper)
        if self._index is not None:
            self._index.add(vectors)

    def save_index(self) -> None:
        if len(self.chunks):
            self.index().save(self.root / "faiss.index")

    def size_on_disk(self) -> int:
        return sum(p.stat().st_size for p in self.root.iterdir() if p.is_file())

    def rows_of(self, doc_ids: Iterable[str]) -> list[int]:
        wanted = set(doc_ids)
        return [i for i, c in enumerate(self.chunks) if c.doc_id in wanted]

    def info(self) -> dict[str, object]:
        m = self.manifest
        return {
            "path": str(self.root),
            "papers": m.n_papers,
            "chunks": m.n_chunks,
            "embedder": m.embedder,
            "dim": m.dim,
            "chunk_chars": m.chunk_chars,
            "overlap_chars": m.overlap_chars,
            "index_kind": m.index_kind,
            "format_version": m.format_version,
            "size_bytes": self.size_on_disk(),
            "abstract_only": sum(1 for p in self.papers if p.abstract_only),
        }
