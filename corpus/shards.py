"""Sharded index builds: workers read, chunk and embed slices of the input; one merge commits them.

Embedding is nearly all of a build's time (MiniLM: ~17 chunks/s on one of this machine's cores),
and it is independent per document, so it spreads over processes or Ray tasks. What must
stay serial is small: the duplicate checks and the citation keys, which depend on every
document before. So a sharded build has three steps:

1. **plan** — the files are cut into shards in build order: a JSONL corpus into runs of
   ``shard_records`` lines, other files in groups of ``shard_files``. A shard is named by a hash
   of what it reads (paths, sizes, mtimes, line range) and of the embedder and chunking, so the
   same command plans the same shards, whatever the number of workers;
2. **shard** — each worker reads its slice (through :func:`corpus.readers.read_path`, under the
   same per-file limits as a serial build), chunks every document and embeds the ones that can
   still be new, into ``shards/NAME.PID@HOST.tmp/`` under the index, then renames that folder to
   ``shards/NAME``. The rename is the commit: a shard folder is whole or absent, so a rerun
   skips finished shards and redoes a half-written one;
3. **merge** — under the index's write lock, the shards are read in plan order and each
   document goes through the serial build's own duplicate rule (:class:`corpus.build.Seen`)
   and citation keys, then into the library in batches, with the vectors the workers made.

Documents, order, doc and chunk ids, keys and vectors are therefore those of a serial build over
the same sources (vectors up to float rounding, as an embedder may batch differently). A
document a worker did not embed because the library already held its id or text is always
skipped at the merge; if one is not (a same-id document whose twin was skipped for another
reason), the merge embeds it itself rather than guess.

How one shard is made and stored is in :mod:`corpus.shard_worker`. Workers are ``spawn``-ed
processes (fork would copy a parent holding torch and its threads), or
Ray tasks when the caller is connected to Ray; there the index folder must be on a file system
every node sees.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import re
import shutil
import socket
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import numpy as np

from agent.core.errors import CorpusError
from agent.core.models import Chunk, Paper, ReadIssue
from agent.core.settings import Settings
from corpus.build import BuildReport, Progress, Seen, embedding_text, iter_sources, open_for_build
from corpus.embeddings import Embedder, embed_in_batches, make_embedder
from corpus.keys import CitationKeys
from corpus.shard_worker import (
    ShardJob,
    ShardMeta,
    ShardRecord,
    build_shard,
    identities,
    init_worker,
    plan_shards,
    pool_task,
    valid_shard,
)
from corpus.store import Library

__all__ = ["SHARDS_DIR", "build_sharded"]

SHARDS_DIR = "shards"

log = logging.getLogger(__name__)


# ---- running the shards ------------------------------------------------------------------


def _run_pool(
    jobs: Sequence[ShardJob],
    known: frozenset[str],
    workers: int,
    on_done: Callable[[ShardMeta], None],
) -> None:
    threads = max(1, (os.cpu_count() or 1) // workers)
    with ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=init_worker,
        initargs=(known, threads),
    ) as pool:
        futures: set[Future[ShardMeta]] = {pool.submit(pool_task, job) for job in jobs}
        try:
            while futures:
                done, futures = wait(futures, return_when=FIRST_COMPLETED)
                for future in done:
                    on_done(future.result())
        except BrokenProcessPool as exc:
            raise CorpusError(
                "a shard worker died (out of memory?); finished shards are kept: rerun the same "
                "command to resume, perhaps with fewer --workers"
            ) from exc
        finally:
            for future in futures:
                future.cancel()


def _run_ray(
    jobs: Sequence[ShardJob],
    known: frozenset[str],
    workers: int,
    on_done: Callable[[ShardMeta], None],
) -> None:
    """Shards as Ray tasks, at most ``workers`` at once, on the Ray this process is connected to."""
    import ray

    task: Any = ray.remote(num_cpus=1, max_retries=2)(build_shard)
    known_ref = ray.put(known)
    waiting = list(jobs)
    running: list[Any] = []
    while waiting or running:
        while waiting and len(running) < workers:
            running.append(task.remote(waiting.pop(0), known_ref))
        done, running = ray.wait(running, num_returns=1)
        on_done(ray.get(done[0]))


# ---- merge -------------------------------------------------------------------------------


def _merge(
    jobs: Sequence[ShardJob],
    library: Library,
    settings: Settings,
    embedder: Embedder,
    batch_docs: int,
    report: BuildReport,
) -> None:
    """Commit every shard, in plan order, as a serial build would have (holding the lock)."""
    staging = Path(jobs[0].staging) if jobs else None
    metas = {job.name: valid_shard(Path(job.staging) / job.name) for job in jobs}
    if missing := [name for name, meta in metas.items() if meta is None]:
        raise CorpusError(
            f"shard(s) {', '.join(missing[:3])} under {staging} vanished before the merge (merged by "
            f"another build, or deleted); rerun the same command"
        )
    keys = CitationKeys(library.keys)
    seen = Seen()
    papers: list[Paper] = []
    chunks: list[Chunk] = []
    vectors: list[np.ndarray] = []

    def flush() -> None:
        if papers:
            library.append(papers, chunks, np.concatenate(vectors))
            report.indexed += len(papers)
            report.chunks += len(chunks)
            papers.clear()
            chunks.clear()
            vectors.clear()

    for job in jobs:
        folder = Path(job.staging) / job.name
        meta = metas[job.name]
        assert meta is not None
        if meta.embedder != library.manifest.embedder:
            raise CorpusError(
                f"shard {folder} was embedded with {meta.embedder!r}, the index with "
                f"{library.manifest.embedder!r}; delete {staging} and rerun"
            )
        dim = library.manifest.dim
        shard_vectors = np.fromfile(folder / "vectors.f32", dtype=np.float32).reshape(meta.vectors, dim)
        chunk_lines = iter((folder / "chunks.jsonl").read_bytes().split(b"\n"))
        row = 0
        for line in (folder / "records.jsonl").read_bytes().split(b"\n")[:-1]:
            rec = ShardRecord.model_validate_json(line)
            if rec.issue is not None:
                report.failed.append(rec.issue)
                continue
            paper = rec.paper
            assert paper is not None
            doc_chunks = [Chunk.model_validate_json(next(chunk_lines)) for _ in range(rec.chunks)]
            doc_rows = slice(row, row + rec.chunks) if rec.embedded else None
            row += rec.chunks if rec.embedded else 0
            report.warnings.extend(rec.warnings)
            reason = seen.duplicate(library, paper, record=rec.record)
            if reason is not None:
                report.skipped.append(
                    ReadIssue(source=paper.source + f" [{paper.doc_id}]", reason=reason, fatal=False)
                )
                continue
            seen.add(paper, record=rec.record)
            keys.assign(paper)
            if not doc_chunks:
                report.failed.append(ReadIssue(source=paper.source, reason="no text to chunk"))
                continue
            for chunk in doc_chunks:
                chunk.key = paper.key
            if doc_rows is not None:
                vectors.append(shard_vectors[doc_rows])
            else:  # skipped by the worker as a likely duplicate, but new after all
                texts = [embedding_text(paper, c) for c in doc_chunks]
                vectors.append(embed_in_batches(embedder, texts, settings.embedding.batch_size))
            papers.append(paper)
            chunks.extend(doc_chunks)
            if len(papers) >= batch_docs:
                flush()
    flush()
    library.save_index()


def build_sharded(
    sources: Sequence[Path],
    root: Path,
    settings: Settings,
    *,
    workers: int = 2,
    ray: bool = False,
    shard_records: int = 2000,
    shard_files: int = 16,
    batch_docs: int = 64,
    progress: Progress | None = None,
    paper_overrides: dict[str, dict[str, object]] | None = None,
) -> BuildReport:
    """Index ``sources`` into ``root`` like :func:`corpus.build.build_index`, on ``workers`` workers.

    ``ray``: run the shards as Ray tasks on the Ray instance this process is connected to
    (``ray.init`` first), instead of a local process pool. ``progress`` is called as each shard
    finishes, with its documents and chunks. Finished shards survive a failure or an interrupt;
    the same call again resumes from them.
    """
    started = time.perf_counter()
    embedder = make_embedder(settings.embedding.model)
    timeout = settings.retrieval.index_lock_timeout_s
    library = open_for_build(root, settings, embedder)
    report = BuildReport()
    paths = list(iter_sources(sources, report.failed))
    staging = root / SHARDS_DIR
    staging.mkdir(exist_ok=True)
    _remove_dead_temporaries(staging)
    jobs = plan_shards(
        paths,
        settings,
        staging,
        shard_records=shard_records,
        shard_files=shard_files,
        overrides=paper_overrides,
    )
    known = frozenset().union(*(identities(p, record=False) for p in library.papers))

    def on_done(meta: ShardMeta) -> None:
        if progress:
            progress(meta.records, meta.chunks)

    todo = []
    for job in jobs:
        if (meta := valid_shard(staging / job.name)) is not None:
            on_done(meta)  # finished by an earlier run
        else:
            todo.append(job)
    log.info("%d shards, %d to build on %d workers", len(jobs), len(todo), workers)
    if todo and ray:
        _run_ray(todo, known, workers, on_done)
    elif todo and workers > 1:
        _run_pool(todo, known, workers, on_done)
    elif todo:
        for job in todo:
            on_done(build_shard(job, known))
    with library.writing(timeout):
        _merge(jobs, library, settings, embedder, batch_docs, report)
        for job in jobs:
            shutil.rmtree(staging / job.name, ignore_errors=True)
    with contextlib.suppress(OSError):  # not empty: shards of another build, kept
        staging.rmdir()
    report.seconds = time.perf_counter() - started
    return report


_TMP = re.compile(r"\.(\d+)@(.+)\.tmp$")


def _remove_dead_temporaries(staging: Path) -> None:
    """Half-written shards of workers on this machine that died (the next run redoes them).

    Another machine's are left alone: whether its worker is alive cannot be told from here.
    """
    host = socket.gethostname()
    for path in staging.glob("*.tmp"):
        match = _TMP.search(path.name)
        if not match or match.group(2) != host:
            continue
        try:
            os.kill(int(match.group(1)), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except PermissionError:
            continue
