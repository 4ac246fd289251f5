"""corpus.build on its own: which files a scan reads, how many documents a progress bar expects,
and what a build reports, batch by batch."""

import gzip
import json
from pathlib import Path

from agent.core.settings import Settings
from corpus.build import build_index, count_documents, iter_sources
from corpus.store import Library


def test_a_directory_scan_skips_notes_hidden_and_unsupported_files(papers_dir: Path) -> None:
    (papers_dir / ".hidden.txt").write_text("secret")
    (papers_dir / "LICENSE.txt").write_text("MIT")
    (papers_dir / "figure.png").write_bytes(b"\x89PNG")
    (papers_dir / "sub").mkdir()
    (papers_dir / "sub" / "deep.txt").write_text("A nested paper about kinases. " * 5)
    names = [p.name for p in iter_sources([papers_dir])]
    assert names == sorted(names, key=lambda n: str(next(papers_dir.rglob(n))))
    assert set(names) == {"crispr.txt", "egfr.md", "malaria.txt", "tp53.md", "deep.txt"}


def test_a_file_named_explicitly_is_always_read(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    missing = tmp_path / "missing.pdf"
    assert list(iter_sources([readme, missing])) == [readme, missing]


def test_count_documents_counts_jsonl_lines_and_files(tmp_path: Path) -> None:
    rows = [json.dumps({"doc_id": f"d{i}", "text": "t"}) for i in range(3)]
    (tmp_path / "a.jsonl").write_text("\n".join(rows) + "\n\n")
    with gzip.open(tmp_path / "b.jsonl.gz", "wt") as fh:
        fh.write("\n".join(rows[:2]))
    (tmp_path / "c.txt").write_text("x")
    paths = [tmp_path / "a.jsonl", tmp_path / "b.jsonl.gz", tmp_path / "c.txt"]
    assert count_documents(paths) == 3 + 2 + 1


def test_build_commits_in_batches_and_reports_progress(
    papers_dir: Path, tmp_path: Path, settings: Settings
) -> None:
    calls: list[tuple[int, int]] = []
    report = build_index(
        [papers_dir], tmp_path / "idx", settings, batch_docs=2, progress=lambda d, c: calls.append((d, c))
    )
    assert report.indexed == 4 and not report.failed
    assert sum(d for d, _ in calls) == 4 and sum(c for _, c in calls) == report.chunks
    assert [d for d, _ in calls] == [2, 2]  # two commits of two documents
    library = Library.open(tmp_path / "idx")
    assert len(library.papers) == 4 and library.index().ntotal == len(library.chunks) == report.chunks
    assert "indexed 4 documents" in report.summary()


def test_duplicates_in_one_build_are_skipped_with_a_reason(
    papers_dir: Path, tmp_path: Path, settings: Settings
) -> None:
    copy = tmp_path / "copy.md"
    copy.write_text((papers_dir / "egfr.md").read_text())
    report = build_index([papers_dir, copy], tmp_path / "idx", settings)
    assert report.indexed == 4
    assert [s.reason for s in report.skipped] == ["duplicate of another document in this build"]


def test_paper_overrides_beat_what_the_reader_found(
    papers_dir: Path, tmp_path: Path, settings: Settings
) -> None:
    source = papers_dir / "egfr.md"
    build_index([source], tmp_path / "plain", settings)
    (read,) = Library.open(tmp_path / "plain").papers
    assert read.title == "Osimertinib overcomes EGFR T790M resistance"
    build_index(
        [source],
        tmp_path / "idx",
        settings,
        paper_overrides={str(source): {"doi": "10.1/x", "venue": "Online source", "title": ""}},
    )
    (paper,) = Library.open(tmp_path / "idx").papers
    assert paper.doi == "10.1/x" and paper.venue == "Online source"
    assert paper.title == read.title  # an empty override does not erase what the reader found
