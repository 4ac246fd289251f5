from pathlib import Path

import numpy as np
import pytest

from agent.core.errors import CorpusError
from agent.core.models import Chunk, Paper
from agent.core.settings import Settings
from corpus.build import build_index
from corpus.embeddings import HashEmbedder
from corpus.store import Library


def test_build_reports_and_persists(tmp_path: Path, papers_dir: Path, settings: Settings) -> None:
    root = tmp_path / "idx"
    report = build_index([papers_dir, tmp_path / "missing.pdf"], root, settings)
    assert report.indexed == 4 and report.chunks >= 4
    assert [i.reason for i in report.failed] == ["no such file"]
    lib = Library.open(root)
    assert lib.manifest.n_papers == 4 and lib.manifest.embedder == "hash-256"
    assert len(lib.chunks) == len(lib.vectors) == lib.index().ntotal
    assert {p.key for p in lib.papers} >= {"Osimertinib2017", "Tp2015"} or len(lib.keys) == 4
    assert (root / "faiss.index").exists()
    assert "README" not in " ".join(p.source for p in lib.papers)


def test_rebuild_is_incremental_and_skips_duplicates(
    tmp_path: Path, papers_dir: Path, settings: Settings
) -> None:
    root = tmp_path / "idx"
    build_index([papers_dir], root, settings)
    again = build_index([papers_dir], root, settings)
    assert again.indexed == 0 and len(again.skipped) == 4
    assert all("already indexed" in s.reason for s in again.skipped)
    copy = tmp_path / "copy.md"
    copy.write_text((papers_dir / "egfr.md").read_text())
    (tmp_path / "new.txt").write_text("A brand new paper about zebrafish fin regeneration in 2020. " * 3)
    more = build_index([copy, tmp_path / "new.txt"], root, settings)
    assert more.indexed == 1
    assert any("already indexed" in s.reason or "duplicate" in s.reason for s in more.skipped)
    assert Library.open(root).manifest.n_papers == 5


def test_duplicate_doi_among_files_is_skipped(tmp_path: Path, settings: Settings) -> None:
    a = tmp_path / "a.txt"
    b = tmp_path / "b.txt"
    a.write_text("Version one of the paper doi:10.1000/xyz about kinases.")
    b.write_text("Version two, reformatted, doi:10.1000/xyz about kinases again.")
    report = build_index([a, b], tmp_path / "idx", settings)
    assert report.indexed == 1
    assert "duplicate DOI 10.1000/xyz" in report.skipped[0].reason


def test_opening_with_other_embedder_or_chunking_is_a_clear_error(
    tmp_path: Path, papers_dir: Path, settings: Settings
) -> None:
    root = tmp_path / "idx"
    build_index([papers_dir], root, settings)
    with pytest.raises(CorpusError, match="embedder='hash-256' but the settings ask for 'minilm'"):
        Library.open(root, embedder="minilm")
    with pytest.raises(CorpusError, match="chunk_chars=400"):
        Library.open(root, chunk_chars=1800)
    other = settings.model_copy(
        update={"chunking": settings.chunking.model_copy(update={"chunk_chars": 900})}
    )
    with pytest.raises(CorpusError, match="chunk_chars"):
        build_index([papers_dir], root, other)
    with pytest.raises(CorpusError, match="no index at"):
        Library.open(tmp_path / "nothing")


def test_crash_mid_commit_then_resume(
    tmp_path: Path, papers_dir: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "idx"
    real_replace = __import__("os").replace
    commits = {"n": 0}

    def crashing_replace(src: object, dst: object) -> None:
        # let the first manifest commit through, crash on the second one: its data files are
        # already appended, but the commit point (manifest) is never reached
        if str(dst).endswith("manifest.json"):
            commits["n"] += 1
            if commits["n"] == 3:
                raise KeyboardInterrupt("simulated crash")
        real_replace(src, dst)

    monkeypatch.setattr("corpus.store.os.replace", crashing_replace)
    with pytest.raises(KeyboardInterrupt):
        build_index([papers_dir], root, settings, batch_docs=2)
    monkeypatch.setattr("corpus.store.os.replace", real_replace)
    partial = Library.open(root)
    assert partial.manifest.n_papers == 2  # the committed batch only
    assert (root / "chunks.jsonl").stat().st_size > partial.manifest.bytes[
        "chunks.jsonl"
    ]  # torn tail present
    resumed = build_index([papers_dir], root, settings, batch_docs=2)
    assert resumed.indexed == 2 and len(resumed.skipped) == 2
    lib = Library.open(root)
    assert lib.manifest.n_papers == 4
    assert len({c.chunk_id for c in lib.chunks}) == len(lib.chunks) == lib.index().ntotal
    assert (root / "chunks.jsonl").stat().st_size == lib.manifest.bytes["chunks.jsonl"]


def test_stale_faiss_file_is_rebuilt_from_vectors(
    tmp_path: Path, papers_dir: Path, settings: Settings
) -> None:
    root = tmp_path / "idx"
    build_index([papers_dir], root, settings)
    (root / "faiss.index").write_bytes(b"garbage")
    lib = Library.open(root)
    assert lib.index().ntotal == len(lib.chunks)


def test_outside_names_never_choose_where_files_go(tmp_path: Path) -> None:
    root = tmp_path / "idx"
    lib = Library.open_or_create(root, embedder="hash-8", dim=8, chunk_chars=400, overlap_chars=0)
    evil = Paper(doc_id="../../../etc/evil", key="Evil2020", source="../../x")
    chunk = Chunk(chunk_id="../../../etc/evil:0", doc_id=evil.doc_id, text="t", char_start=0, char_end=1)
    lib.append([evil], [chunk], np.ones((1, 8), dtype=np.float32))
    lib.save_index()
    assert sorted(p.name for p in root.iterdir()) == [
        "chunks.jsonl",
        "faiss.index",
        "manifest.json",
        "papers.jsonl",
        "vectors.f32",
        "write.lock",
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]


def test_chunk_and_vector_counts_must_match(tmp_path: Path) -> None:
    lib = Library.open_or_create(tmp_path / "i", embedder="hash-8", dim=8, chunk_chars=400, overlap_chars=0)
    with pytest.raises(CorpusError, match="1 chunks but 2 vectors"):
        lib.append([], [Chunk(chunk_id="a", doc_id="a", text="t", char_start=0, char_end=1)], np.ones((2, 8)))


def test_hash_embedder_is_deterministic_and_normalised() -> None:
    e = HashEmbedder(64)
    a = e.embed_documents(["kinase inhibitor resistance", "kinase inhibitor resistance"])
    assert np.allclose(a[0], a[1]) and np.isclose(np.linalg.norm(a[0]), 1.0)
    assert e.embed_documents([]).shape == (0, 64)
