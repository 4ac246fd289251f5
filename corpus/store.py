"""The on-disk library: papers, chunks, raw vectors, a FAISS index and a manifest.

Layout of an index directory (file names are fixed; names from outside never choose a path)::

    manifest.json   format version, embedder, dimension, chunking, counts and byte lengths
    papers.jsonl    one Paper a line
    chunks.jsonl    one Chunk a line; line i is vector row i
    vectors.f32     raw float32 rows, the source of truth for the index
    faiss.index     derived; rebuilt from vectors.f32 whenever it is out of step
    write.lock      the pid of the last writer; an exclusive ``flock`` on it marks the writer now
    shards/         a sharded build's finished shards, waiting to be merged (see corpus.shards)

Commit protocol: append to the three data files, fsync, then replace ``manifest.json``
atomically. The manifest records how many bytes of each file are committed, so bytes a crash
left after the last commit are cut off on the next open. A build that is interrupted resumes
from its last committed batch and never sees a half-written one.

One writer at a time: every write (a build, ``append``, ``save_index``, creating the index)
holds an OS file lock on ``write.lock``. The kernel drops the lock when its holder dies, even by
``kill -9``, so there is no stale lock to clean up. A second writer waits, logging once that it
does, and gives up with a :class:`CorpusError` after its timeout. The lock is re-entrant within
one thread, so a build holding it can call ``append``. On taking the lock, a library opened
earlier first reads what other writers committed since; without that, its stale byte counts
would truncate their commits. Readers never take the lock: committed bytes are never rewritten
and the manifest is replaced atomically, so a reader sees the last commit whole, never part of
the next one.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np
from pydantic import BaseModel, Field

from agent.core.errors import CorpusError
from agent.core.models import Chunk, Paper
from corpus.index import IndexKind, VectorIndex

__all__ = ["FORMAT_VERSION", "LOCK_NAME", "Library", "Manifest", "write_atomic", "write_lock"]

FORMAT_VERSION = 1
LOCK_NAME = "write.lock"
_FILES = ("papers.jsonl", "chunks.jsonl", "vectors.f32")

log = logging.getLogger(__name__)


class Manifest(BaseModel):
    format_version: int = FORMAT_VERSION
    embedder: str
    dim: int
    chunk_chars: int
    overlap_chars: int
    index_kind: IndexKind = "flat"
    index_params: dict[str, int | None] = Field(
        default_factory=dict, description="FAISS parameters (IVF-PQ lists, code size), fixed at creation."
    )
    n_papers: int = 0
    n_chunks: int = 0
    bytes: dict[str, int] = Field(default_factory=lambda: dict.fromkeys(_FILES, 0))
    created: float = Field(default_factory=time.time)
    updated: float = Field(default_factory=time.time)


def _tmp_name(path: Path) -> Path:
    # One name per process and thread: a reader re-saving faiss.index beside a writer (or two
    # readers) must never write into the same temporary file.
    return path.with_name(f"{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` all at once: a crash leaves the old file or the new one."""
    tmp = _tmp_name(path)
    with tmp.open("wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _read_segment(path: Path, start: int, end: int) -> bytes:
    """Committed bytes ``start:end`` of a data file (bytes past ``end`` are an unfinished commit)."""
    if end == start:
        return b""
    with path.open("rb") as fh:
        fh.seek(start)
        data = fh.read(end - start)
    if len(data) != end - start:
        raise CorpusError(f"{path} is shorter than its manifest says ({start + len(data)} < {end} bytes)")
    return data


def _lines(data: bytes) -> list[bytes]:
    # Split on b"\n" only: str.splitlines() would also split inside a JSON string at U+2028 or
    # U+0085, which the JSON writer leaves unescaped and PDFs do contain.
    return data.split(b"\n")[:-1] if data else []


class _Holder:
    """This process's hold on one library's lock: which thread, how deep, the locked file."""

    def __init__(self) -> None:
        self.thread_lock = threading.RLock()
        self.depth = 0
        self.fd: int | None = None


_holders: dict[str, _Holder] = {}
_holders_guard = threading.Lock()


def _holder_pid(lock_path: Path) -> str:
    try:
        pid = lock_path.read_text().strip()
    except OSError:
        return ""
    return f" (pid {pid})" if pid.isdigit() else ""


def _lock_error(root: Path, timeout: float) -> CorpusError:
    who = _holder_pid(root / LOCK_NAME)
    return CorpusError(
        f"another process{who} is writing the index at {root}; gave up after {timeout:g}s. "
        f"Let it finish, or wait longer (retrieval.index_lock_timeout_s)"
    )


def _flock(fd: int, root: Path, deadline: float | None, timeout: float | None) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return
    except BlockingIOError:
        if timeout == 0:
            raise _lock_error(root, 0.0) from None
    log.warning("waiting for another process writing %s%s", root, _holder_pid(root / LOCK_NAME))
    if deadline is None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return
    pause = 0.02
    while True:
        if time.monotonic() >= deadline:
            raise _lock_error(root, timeout or 0.0)
        time.sleep(min(pause, max(deadline - time.monotonic(), 0.0)))
        pause = min(pause * 2, 0.5)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            continue


@contextlib.contextmanager
def write_lock(root: Path, timeout: float | None = None) -> Iterator[bool]:
    """Hold the write lock of the library at ``root`` (created if missing) for the block.

    ``timeout`` is how long to wait for another writer, in seconds: ``None`` waits as long as
    it takes, ``0`` fails at once. Yields True for the outermost hold in this thread, False for
    a nested one. The OS releases the lock if the process dies, so a crash never leaves it held.
    """
    root.mkdir(parents=True, exist_ok=True)
    deadline = None if timeout is None else time.monotonic() + timeout
    with _holders_guard:
        holder = _holders.setdefault(os.path.realpath(root), _Holder())
    # Threads of one process share the file lock, so they take turns on a thread lock first.
    if timeout is None:
        acquired = holder.thread_lock.acquire()
    elif timeout > 0:
        acquired = holder.thread_lock.acquire(timeout=timeout)
    else:
        acquired = holder.thread_lock.acquire(blocking=False)
    if not acquired:
        raise _lock_error(root, timeout or 0.0)
    try:
        outermost = holder.depth == 0
        if outermost:
            fd = os.open(root / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                _flock(fd, root, deadline, timeout)
            except BaseException:
                os.close(fd)
                raise
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
            holder.fd = fd
        holder.depth += 1
        try:
            yield outermost
        finally:
            holder.depth -= 1
            if holder.depth == 0 and holder.fd is not None:
                fd, holder.fd = holder.fd, None
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
    finally:
        holder.thread_lock.release()


def _read_manifest(root: Path) -> Manifest:
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
    return manifest


def _nothing_loaded(manifest: Manifest) -> Manifest:
    return manifest.model_copy(update={"n_papers": 0, "n_chunks": 0, "bytes": dict.fromkeys(_FILES, 0)})


_TMP_PID = re.compile(r"\.(\d+)-\d+\.tmp")  # also VectorIndex.save's own ".tmp" beside it


def _remove_orphaned_temporaries(root: Path) -> None:
    """Temporary files of processes that died mid-write (``kill -9`` between write and rename)."""
    for path in root.glob("*.tmp"):
        match = _TMP_PID.search(path.name)
        if not match or int(match.group(1)) == os.getpid():
            continue
        try:
            os.kill(int(match.group(1)), 0)
        except ProcessLookupError:
            path.unlink(missing_ok=True)
        except PermissionError:
            continue  # alive, owned by someone else


def _save_index_file(index: VectorIndex, path: Path) -> None:
    tmp = _tmp_name(path)
    index.save(tmp)
    os.replace(tmp, path)


class Library:
    """Papers, chunks and vectors of one index directory, loaded in memory for search.

    ``manifest`` describes what is loaded, which is the last commit seen: a library opened for
    reading is a snapshot. ``lock_timeout`` is how long its writes wait for another writer
    (None: as long as it takes).
    """

    def __init__(self, root: Path, manifest: Manifest, *, lock_timeout: float | None = None) -> None:
        self.root = root
        self.manifest = manifest
        self.lock_timeout = lock_timeout
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
        lock_timeout: float | None = None,
    ) -> Library:
        """Open an existing index; expected parameters that differ are a clear error."""
        manifest = _read_manifest(root)
        expected = {"embedder": embedder, "chunk_chars": chunk_chars, "overlap_chars": overlap_chars}
        for field, want in expected.items():
            have = getattr(manifest, field)
            if want is not None and want != have:
                raise CorpusError(
                    f"index at {root} was built with {field}={have!r} but the settings ask for {want!r}: "
                    f"use the same setting, or rebuild the index into a new directory"
                )
        lib = cls(root, _nothing_loaded(manifest), lock_timeout=lock_timeout)
        lib._load(manifest)
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
        index_params: dict[str, int | None] | None = None,
        lock_timeout: float | None = None,
    ) -> Library:
        if not (root / "manifest.json").exists():
            with write_lock(root, lock_timeout):
                # Checked again under the lock: a writer that was first has created it meanwhile,
                # and creating it again would empty the files it has committed to.
                if not (root / "manifest.json").exists():
                    manifest = Manifest(
                        embedder=embedder,
                        dim=dim,
                        chunk_chars=chunk_chars,
                        overlap_chars=overlap_chars,
                        index_kind=index_kind,
                        index_params=dict(index_params or {}),
                    )
                    for name in _FILES:
                        (root / name).write_bytes(b"")
                    write_atomic(root / "manifest.json", manifest.model_dump_json(indent=2).encode())
                    return cls(root, manifest, lock_timeout=lock_timeout)
        lib = cls.open(
            root,
            embedder=embedder,
            chunk_chars=chunk_chars,
            overlap_chars=overlap_chars,
            lock_timeout=lock_timeout,
        )
        if lib.manifest.dim != dim:
            raise CorpusError(f"index at {root} has dimension {lib.manifest.dim}, embedder gives {dim}")
        return lib

    def _load(self, target: Manifest) -> None:
        """Read what ``target`` commits beyond what is loaded (on open: everything)."""
        m = self.manifest
        if (
            (target.created, target.dim, target.embedder) != (m.created, m.dim, m.embedder)
            or target.n_papers < m.n_papers
            or target.n_chunks < m.n_chunks
            or any(target.bytes[name] < m.bytes[name] for name in _FILES)
        ):
            raise CorpusError(
                f"index at {self.root} was rebuilt by another process since it was opened here; open it again"
            )
        segments = {
            name: _read_segment(self.root / name, m.bytes[name], target.bytes[name]) for name in _FILES[:2]
        }
        paper_lines = _lines(segments["papers.jsonl"])
        chunk_lines = _lines(segments["chunks.jsonl"])
        new_papers, new_chunks = target.n_papers - m.n_papers, target.n_chunks - m.n_chunks
        if len(paper_lines) != new_papers or len(chunk_lines) != new_chunks:
            raise CorpusError(f"index at {self.root} is inconsistent with its manifest; rebuild it")
        papers = [Paper.model_validate_json(line) for line in paper_lines]
        chunks = [Chunk.model_validate_json(line) for line in chunk_lines]
        width = target.dim * 4
        raw = np.fromfile(
            self.root / "vectors.f32",
            dtype=np.float32,
            count=new_chunks * target.dim,
            offset=m.n_chunks * width,
        )
        if raw.size != new_chunks * target.dim:
            raise CorpusError(f"{self.root / 'vectors.f32'} is truncated; rebuild the index")
        vectors = raw.reshape(new_chunks, target.dim)
        self.manifest = target
        self.papers.extend(papers)
        self.chunks.extend(chunks)
        self.vectors = np.concatenate([self.vectors, vectors]) if len(self.vectors) else vectors
        for paper in papers:
            self._remember(paper)
        if self._index is not None:
            self._index.add(vectors)

    def refresh(self) -> None:
        """Load what other processes committed since this library was opened or last refreshed."""
        disk = _read_manifest(self.root)
        m = self.manifest
        if (disk.created, disk.n_papers, disk.n_chunks, disk.bytes) != (
            m.created,
            m.n_papers,
            m.n_chunks,
            m.bytes,
        ):
            self._load(disk)

    @contextlib.contextmanager
    def writing(self, timeout: float | None = None) -> Iterator[None]:
        """Hold this library's write lock, up to date with every commit made before it.

        ``timeout`` overrides :attr:`lock_timeout` for this hold.
        """
        with write_lock(self.root, self.lock_timeout if timeout is None else timeout) as outermost:
            if outermost:
                _remove_orphaned_temporaries(self.root)
                self.refresh()
            yield

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
        n = len(self.chunks)
        if self._index is not None and self._index.ntotal == n and not self._index.needs_rebuild(n):
            self._index.exact = self.vectors
            return self._index
        path = self.root / "faiss.index"
        m = self.manifest
        index: VectorIndex | None = None
        if path.exists():
            try:
                index = VectorIndex.load(path, m.index_kind, m.dim, m.index_params)
            except RuntimeError:
                index = None
        # An IVF-PQ index built while the library was small is exact search; past
        # APPROXIMATE_MIN_ROWS it is rebuilt as IVF-PQ.
        if index is None or index.ntotal != n or index.needs_rebuild(n):
            index = VectorIndex.from_params(m.dim, m.index_kind, m.index_params).build(self.vectors)
            if n:
                _save_index_file(index, path)
        index.exact = self.vectors  # IVF-PQ re-scores its candidates with the raw vectors
        self._index = index
        return index

    # ---- writing -------------------------------------------------------------------------

    def append(self, papers: Sequence[Paper], chunks: Sequence[Chunk], vectors: np.ndarray) -> None:
        """Commit one batch: data files first, then the manifest (the commit point)."""
        if len(chunks) != len(vectors):
            raise CorpusError(f"{len(chunks)} chunks but {len(vectors)} vectors")
        vectors = np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1, self.manifest.dim)
        with self.writing():
            self._commit(papers, chunks, vectors)

    def _commit(self, papers: Sequence[Paper], chunks: Sequence[Chunk], vectors: np.ndarray) -> None:
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
        with self.writing():
            if len(self.chunks):
                _save_index_file(self.index(), self.root / "faiss.index")

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
            **({"index_params": m.index_params} if m.index_kind != "flat" else {}),
            "format_version": m.format_version,
            "size_bytes": self.size_on_disk(),
            "abstract_only": sum(1 for p in self.papers if p.abstract_only),
        }
