"""Several processes writing one library: the write lock, waiting, and what readers see.

The writers are real processes (``python -c``), because the lock is an OS file lock between
processes; threads of one process would only exercise the in-process half of it.
"""

import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from agent.core.errors import CorpusError
from agent.core.models import Chunk, Paper
from agent.core.settings import Settings
from corpus.build import build_index
from corpus.store import Library, write_lock

REPO = Path(__file__).resolve().parents[2]

# A child writer: waits for the go file (so all start together), then builds. The progress
# callback sleeps a little per batch so the builds last long enough to overlap.
WRITER = textwrap.dedent(
    """
    import logging, sys, time
    from pathlib import Path
    from agent.core.settings import load_settings
    from corpus.build import build_index

    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s")
    root, go, *sources = sys.argv[1:]
    settings = load_settings(
        environ={}, embedding__model="hash", chunking__chunk_chars=400, chunking__overlap_chars=50
    )
    while not Path(go).exists():
        time.sleep(0.01)
    report = build_index(
        [Path(s) for s in sources], Path(root), settings, batch_docs=2,
        progress=lambda docs, chunks: time.sleep(0.02),
    )
    print(report.indexed, len(report.skipped), len(report.failed))
    """
)

# A child that holds the lock until it is killed.
HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from corpus.store import write_lock

    with write_lock(Path(sys.argv[1])):
        print("held", flush=True)
        time.sleep(600)
    """
)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def _spawn(script: str, *args: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script, *map(str, args)],
        cwd=REPO,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _make_sources(tmp_path: Path) -> tuple[list[Path], Path]:
    docs = tmp_path / "docs"
    docs.mkdir()
    files = []
    for i in range(24):
        path = docs / f"paper{i:02d}.md"
        path.write_text(
            f"# Study {i} of kinase signalling in zebrafish tissue number {i}\n\n"
            + f"In 20{10 + i % 10} we measured pathway {i} activity across {i + 3} conditions. " * (3 + i % 5)
        )
        files.append(path)
    records = tmp_path / "records.jsonl"
    records.write_text(
        "".join(
            f'{{"doc_id": "rec:{i}", "title": "Record {i}", "text": "Abstract {i} on regeneration. '
            + f'Cells divide {i} times."}}\n'
            for i in range(6)
        )
    )
    return files, records


def _snapshot(root: Path) -> tuple[list[str], dict[str, str], dict[str, np.ndarray]]:
    lib = Library.open(root)
    doc_ids = [p.doc_id for p in lib.papers]
    chunk_ids = [c.chunk_id for c in lib.chunks]
    assert len(doc_ids) == len(set(doc_ids)), "a document was indexed twice"
    assert len(chunk_ids) == len(set(chunk_ids)), "a chunk was stored twice"
    assert len({p.key for p in lib.papers}) == len(lib.papers), "two papers share a citation key"
    assert len(lib.vectors) == len(lib.chunks) == lib.index().ntotal
    texts = {c.chunk_id: c.text for c in lib.chunks}
    vectors = {c.chunk_id: lib.vectors[i] for i, c in enumerate(lib.chunks)}
    return sorted(doc_ids), texts, vectors


def test_four_processes_building_at_once_equal_one_serial_build(tmp_path: Path, settings: Settings) -> None:
    files, records = _make_sources(tmp_path)
    root, go = tmp_path / "shared-idx", tmp_path / "go"
    # Overlapping slices: every file is given to two writers, the records file to two.
    slices = [files[i * 4 : i * 4 + 12] + ([records] if i % 2 == 0 else []) for i in range(4)]
    writers = [_spawn(WRITER, root, go, *sources) for sources in slices]
    go.touch()
    outputs = [w.communicate(timeout=240) for w in writers]
    for writer, (_, err) in zip(writers, outputs, strict=True):
        assert writer.returncode == 0, err
    assert sum(int(out.split()[0]) for out, _ in outputs) == len(files) + 6
    assert any("waiting for another process writing" in err for _, err in outputs), (
        "the writers never overlapped, so the lock was not exercised"
    )

    serial = tmp_path / "serial-idx"
    build_index([*files, records], serial, settings)
    got_ids, got_texts, got_vectors = _snapshot(root)
    want_ids, want_texts, want_vectors = _snapshot(serial)
    assert got_ids == want_ids and len(got_ids) == len(files) + 6
    assert got_texts == want_texts
    for chunk_id, vector in want_vectors.items():
        assert np.allclose(got_vectors[chunk_id], vector)


def test_second_writer_with_timeout_zero_fails_naming_the_folder(
    tmp_path: Path, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    files, _ = _make_sources(tmp_path)
    root = tmp_path / "idx"
    holder = _spawn(HOLDER, root)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        now = settings.with_overrides(retrieval={"index_lock_timeout_s": 0})
        with pytest.raises(
            CorpusError, match=rf"another process \(pid {holder.pid}\) is writing the index at {root}"
        ):
            build_index(files[:2], root, now)
        patient = settings.with_overrides(retrieval={"index_lock_timeout_s": 0.3})
        started = time.monotonic()
        with (
            caplog.at_level(logging.WARNING, logger="corpus.store"),
            pytest.raises(CorpusError, match="0.3s"),
        ):
            build_index(files[:2], root, patient)
        assert time.monotonic() - started >= 0.3
        waits = [r for r in caplog.records if "waiting for another process writing" in r.getMessage()]
        assert len(waits) == 1 and str(root) in waits[0].getMessage()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.communicate(timeout=30)
    # The OS dropped the dead holder's lock: the next writer goes straight ahead.
    report = build_index(files[:2], root, settings.with_overrides(retrieval={"index_lock_timeout_s": 0}))
    assert report.indexed == 2


def test_readers_see_whole_commits_only(tmp_path: Path) -> None:
    files, _ = _make_sources(tmp_path)
    root, go = tmp_path / "idx", tmp_path / "go"
    writer = _spawn(WRITER, root, go, *files)
    go.touch()
    seen: set[int] = set()
    while writer.poll() is None or not seen:
        if not (root / "manifest.json").exists():
            continue
        lib = Library.open(root)  # never blocks, never sees part of a commit
        ids = {p.doc_id for p in lib.papers}
        assert len(lib.chunks) == len(lib.vectors) == lib.manifest.n_chunks
        assert len(ids) == len(lib.papers) == lib.manifest.n_papers
        assert {c.doc_id for c in lib.chunks} == ids  # a paper commits with all its chunks
        assert not seen or len(ids) >= max(seen)
        seen.add(len(ids))
    _, err = writer.communicate(timeout=60)
    assert writer.returncode == 0, err
    assert max(seen) == len(files) and len(seen) > 1


def test_a_library_opened_earlier_keeps_what_others_committed_since(
    tmp_path: Path, settings: Settings
) -> None:
    files, _ = _make_sources(tmp_path)
    root = tmp_path / "idx"
    build_index(files[:2], root, settings)
    early = Library.open(root)
    build_index(files[2:5], root, settings)  # another writer, after `early` was read
    paper = Paper(doc_id="late", key="Late2024", source="late.txt")
    chunk = Chunk(chunk_id="late:0", doc_id="late", text="late text", char_start=0, char_end=9)
    early.append([paper], [chunk], np.ones((1, early.manifest.dim), dtype=np.float32))
    assert len(early.papers) == 6  # it read the other writer's commits before its own
    reopened = Library.open(root)
    assert [p.doc_id for p in reopened.papers] == [p.doc_id for p in early.papers]
    assert reopened.index().ntotal == len(reopened.chunks) == len(early.chunks)


def test_the_lock_is_reentrant_in_one_thread_and_released_after(tmp_path: Path) -> None:
    root = tmp_path / "idx"
    with write_lock(root, 0) as outer, write_lock(root, 0) as inner:
        assert outer and not inner
    with write_lock(root, 0) as again:
        assert again
