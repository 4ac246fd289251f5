"""One shard of a sharded index build: what it reads, how a worker makes it, how it is stored.

A shard is a folder under ``INDEX/shards/`` (see :mod:`corpus.shards` for the build around it):

    records.jsonl   one line a read result, in read order: a read issue, or a document (its
                    Paper, whether it came from a JSONL corpus, its number of chunks, whether
                    they were embedded, its reader warnings)
    chunks.jsonl    every document's chunks, in order, citation keys still empty
    vectors.f32     float32 rows for the chunks of embedded documents only, in order
    shard.json      written last: counts, embedder, and the byte length of each file

A worker writes all of it into ``NAME.PID@HOST.tmp/`` and renames that to ``NAME``: a shard folder
is whole or absent, and one whose files do not match ``shard.json`` is made again.

A JSONL part is read by copying its lines into a file of the same name and handing that to
:func:`corpus.readers.read_path`, so the records are parsed exactly as a serial build parses
them (the reader's line numbers are shifted back to the original file's). Without the copy a
worker would parse every line before its slice, and N slices would cost N² lines.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import os
import re
import shutil
import socket
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel

from agent.core.models import Chunk, Paper, ReadIssue
from agent.core.settings import Settings
from corpus.build import embedding_text
from corpus.chunking import chunk_document
from corpus.embeddings import embed_in_batches, make_embedder
from corpus.isolate import pdf_reader
from corpus.readers import read_path, source_name
from corpus.store import write_atomic

__all__ = [
    "Part",
    "ShardJob",
    "ShardMeta",
    "ShardRecord",
    "build_shard",
    "identities",
    "init_worker",
    "plan_shards",
    "pool_task",
    "temporary_name",
    "valid_shard",
]

_FORMAT = 1
_JSONL = (".jsonl", ".jsonl.gz")


@dataclass(frozen=True)
class Part:
    """A whole file, or physical lines ``lineno .. lineno+lines-1`` of a JSONL corpus."""

    path: str
    offset: int = 0  # byte offset of the first line (in the decompressed stream of a .gz)
    lineno: int = 1
    lines: int | None = None  # None: to the end of the file


@dataclass(frozen=True)
class ShardJob:
    """One worker's task: the parts it reads, where its shard goes, the settings it builds with."""

    name: str
    parts: tuple[Part, ...]
    staging: str
    settings: Settings
    overrides: dict[str, dict[str, object]] = field(default_factory=dict)  # by path, as build_index


class ShardRecord(BaseModel):
    """One line of a shard's ``records.jsonl``: a read failure, or a document and its chunks."""

    issue: ReadIssue | None = None
    paper: Paper | None = None
    record: bool = False  # from a JSONL corpus (no DOI de-duplication, as in a serial build)
    chunks: int = 0
    embedded: bool = True
    warnings: list[ReadIssue] = []


class ShardMeta(BaseModel):
    """``shard.json``, written last: what the shard holds and how many bytes of each file."""

    format: int = _FORMAT
    embedder: str
    dim: int
    records: int
    documents: int
    chunks: int
    vectors: int
    bytes: dict[str, int]


def _is_jsonl(path: Path) -> bool:
    return path.name.lower().endswith(_JSONL)


def _jsonl_parts(path: Path, shard_records: int) -> list[Part]:
    """Runs of ``shard_records`` lines; the whole file as one part if it cannot be scanned."""
    opener: Callable[..., Any] = gzip.open if path.name.lower().endswith(".gz") else open
    parts: list[Part] = []
    offset = start = 0
    lineno, taken = 1, 0
    try:
        with opener(path, "rb") as fh:
            for line in fh:
                if taken == shard_records:
                    parts.append(Part(str(path), start, lineno, taken))
                    start, lineno, taken = offset, lineno + taken, 0
                taken += 1
                offset += len(line)
    except (OSError, EOFError):
        return [Part(str(path))]  # a truncated or corrupt file: the reader reports where it breaks
    parts.append(Part(str(path), start, lineno, None))
    return parts


def _fingerprint(part: Part) -> dict[str, Any]:
    try:
        stat = os.stat(part.path)
        return {**asdict(part), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    except OSError:
        return asdict(part)


def plan_shards(
    paths: Sequence[Path],
    settings: Settings,
    staging: Path,
    *,
    shard_records: int = 2000,
    shard_files: int = 16,
    overrides: dict[str, dict[str, object]] | None = None,
) -> list[ShardJob]:
    """Cut ``paths`` (as :func:`corpus.build.iter_sources` lists them) into shards, in build order.

    ``overrides`` is :func:`corpus.build.build_index`'s ``paper_overrides``; each shard carries
    those of its files, and they are part of its name.
    """
    jobs: list[ShardJob] = []
    files: list[Part] = []
    recipe = {
        "format": _FORMAT,
        "embedder": settings.embedding.model,
        "chunking": settings.chunking.model_dump(),
        "limits": settings.index.model_dump(),
    }

    def add(parts: list[Part]) -> None:
        mine = {p.path: (overrides or {})[p.path] for p in parts if p.path in (overrides or {})}
        key = json.dumps(
            {**recipe, "parts": [_fingerprint(p) for p in parts], "overrides": mine},
            sort_keys=True,
            default=str,
        )
        name = f"{len(jobs):05d}-{hashlib.sha256(key.encode()).hexdigest()[:16]}"
        jobs.append(ShardJob(name, tuple(parts), str(staging), settings, mine))

    for path in paths:
        if _is_jsonl(path) and path.is_file():
            if files:
                add(files)
                files = []
            for part in _jsonl_parts(path, max(1, shard_records)):
                add([part])
        else:
            files.append(Part(str(path)))
            if len(files) >= max(1, shard_files):
                add(files)
                files = []
    if files:
        add(files)
    return jobs


def _read_slice(part: Part, workdir: Path) -> Path:
    """Copy the part's lines into a file of the same name, for :func:`read_path` to read."""
    src = Path(part.path)
    gz = src.name.lower().endswith(".gz")
    opener: Callable[..., Any] = gzip.open if gz else open
    dest = workdir / "input" / src.name
    dest.parent.mkdir(exist_ok=True)
    writer: Callable[..., Any] = functools.partial(gzip.open, compresslevel=1) if gz else open
    with opener(src, "rb") as fh, writer(dest, "wb") as out:
        fh.seek(part.offset)
        for i, line in enumerate(fh):
            if part.lines is not None and i >= part.lines:
                break
            out.write(line)
    return dest


def _relabel(issue: ReadIssue, copy: str, original: str, lineno: int) -> ReadIssue:
    """A read issue of a slice copy, named as in the original file (path, line number)."""
    if issue.source == copy:
        return issue.model_copy(update={"source": original})
    match = re.fullmatch(re.escape(copy) + r":(\d+)", issue.source)
    if match:
        return issue.model_copy(update={"source": f"{original}:{int(match.group(1)) + lineno - 1}"})
    return issue


def _read_part(part: Part, workdir: Path, read_pdf: Any) -> Iterator[Any]:
    path = Path(part.path)
    if part.offset == 0 and part.lines is None:
        yield from read_path(path, pdf_reader=read_pdf)
        return
    copy = _read_slice(part, workdir)
    names = (source_name(copy), source_name(path))
    for result in read_path(copy, pdf_reader=read_pdf):
        if isinstance(result, ReadIssue):
            yield _relabel(result, *names, part.lineno)
            continue
        result.warnings = [_relabel(w, *names, part.lineno) for w in result.warnings]
        if result.paper.source == names[0]:
            result.paper.source = names[1]
        yield result
    copy.unlink()


def valid_shard(folder: Path) -> ShardMeta | None:
    try:
        meta = ShardMeta.model_validate_json((folder / "shard.json").read_bytes())
    except (OSError, ValueError):
        return None
    if meta.format != _FORMAT:
        return None
    for name, size in meta.bytes.items():
        try:
            if (folder / name).stat().st_size != size:
                return None
        except OSError:
            return None
    return meta


def _write(path: Path, data: bytes) -> None:
    with path.open("wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def identities(paper: Paper, *, record: bool) -> set[str]:
    """What makes a later document a duplicate of this one (see corpus.build.Seen)."""
    ids = {f"id:{paper.doc_id}"}
    if paper.content_hash:
        ids.add(f"hash:{paper.content_hash}")
    if paper.doi and not record:  # corpus records share their paper's DOI, so it is no identity
        ids.add(f"doi:{paper.doi.lower()}")
    return ids


def temporary_name(name: str, pid: int | None = None) -> str:
    """Where a worker writes shard ``name`` before the rename: its pid and host say whose it is
    (on a Ray cluster, workers on several machines share the folder)."""
    return f"{name}.{os.getpid() if pid is None else pid}@{socket.gethostname()}.tmp"


def build_shard(job: ShardJob, known: frozenset[str] = frozenset()) -> ShardMeta:
    """Read, chunk and embed one shard into ``staging/NAME`` (nothing to do if it is there).

    ``known`` holds the identities (doc ids, content hashes, DOIs) of what the library had when
    the build was planned: documents matching them, or an earlier document of this shard, are
    chunked but not embedded, since the merge will skip them as duplicates.
    """
    staging = Path(job.staging)
    final = staging / job.name
    if (done := valid_shard(final)) is not None:
        return done
    # A shard folder only appears whole (by rename), so one that does not check out was damaged
    # afterwards: made again.
    shutil.rmtree(final, ignore_errors=True)
    settings = job.settings
    tmp = staging / temporary_name(job.name)
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    embedder = make_embedder(settings.embedding.model)
    records: list[ShardRecord] = []
    chunks: list[Chunk] = []
    texts: list[str] = []
    seen: set[str] = set()
    with pdf_reader(settings.index) as read_pdf:
        for part in job.parts:
            for result in _read_part(part, tmp, read_pdf):
                if isinstance(result, ReadIssue):
                    records.append(ShardRecord(issue=result))
                    continue
                paper = result.paper
                for name, value in job.overrides.get(part.path, {}).items():
                    if value not in (None, "", []):
                        setattr(paper, name, value)
                doc_chunks = chunk_document(
                    result,
                    chunk_chars=settings.chunking.chunk_chars,
                    overlap_chars=settings.chunking.overlap_chars,
                )
                record = _is_jsonl(Path(part.path))
                ids = identities(paper, record=record)
                embedded = not (ids & known or ids & seen)
                seen |= ids
                records.append(
                    ShardRecord(
                        paper=paper,
                        record=record,
                        chunks=len(doc_chunks),
                        embedded=embedded,
                        warnings=result.warnings,
                    )
                )
                chunks.extend(doc_chunks)
                if embedded:
                    texts.extend(embedding_text(paper, c) for c in doc_chunks)
    vectors = embed_in_batches(embedder, texts, settings.embedding.batch_size)
    payloads = {
        "records.jsonl": "".join(r.model_dump_json(exclude_defaults=True) + "\n" for r in records).encode(),
        "chunks.jsonl": "".join(c.model_dump_json() + "\n" for c in chunks).encode(),
        "vectors.f32": np.ascontiguousarray(vectors, dtype=np.float32).tobytes(),
    }
    for name, data in payloads.items():
        _write(tmp / name, data)
    shutil.rmtree(tmp / "input", ignore_errors=True)
    meta = ShardMeta(
        embedder=embedder.name,
        dim=int(vectors.shape[1]) if vectors.ndim == 2 and vectors.shape[1] else embedder.dim,
        records=len(records),
        documents=sum(1 for r in records if r.paper is not None),
        chunks=len(chunks),
        vectors=len(vectors),
        bytes={name: len(data) for name, data in payloads.items()},
    )
    write_atomic(tmp / "shard.json", meta.model_dump_json().encode())
    try:
        os.rename(tmp, final)  # the commit: the shard folder appears whole
    except OSError:  # another build finished the same shard first
        shutil.rmtree(tmp, ignore_errors=True)
        if (done := valid_shard(final)) is None:
            raise
        return done
    return meta


# ---- in a worker process -----------------------------------------------------------------

_KNOWN: frozenset[str] = frozenset()


def init_worker(known: frozenset[str], threads: int) -> None:
    """A pool process's start: what the library holds, and its share of the cores for torch/BLAS."""
    global _KNOWN
    _KNOWN = known
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(threads)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def pool_task(job: ShardJob) -> ShardMeta:
    return build_shard(job, _KNOWN)
