"""Per-file time and memory limits: a worker that overruns is killed, the file reported, the next
file read by a fresh worker."""

import signal
import time
from pathlib import Path

import pytest

from agent.core.models import Document, ReadIssue
from agent.core.settings import IndexSettings, Settings
from corpus.build import build_index
from corpus.isolate import IsolatedReader, pdf_reader
from corpus.store import Library
from tests.corpus.hostile_pdfs import many_pages_pdf, slow_text_pdf
from tests.corpus.pdfs import make_pdf

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="POSIX only")
READERS = "tests.corpus.hostile_readers"


def test_a_file_past_the_time_limit_is_reported_and_the_next_one_read(tmp_path: Path) -> None:
    with IsolatedReader(f"{READERS}:sleepy", timeout_s=0.3, memory_mb=None) as reader:
        started = time.perf_counter()
        issue = reader(tmp_path / "slow.pdf")
        assert time.perf_counter() - started < 10  # the worker starts, sleeps 0.3 s, is killed
        assert isinstance(issue, ReadIssue) and issue.fatal
        assert issue.source == str(tmp_path / "slow.pdf")
        assert issue.reason == "took longer than 0.3 s to read (index.file_timeout_s); skipped"
        reader.read = f"{READERS}:echo"  # the next worker reads another way
        assert reader(tmp_path / "next.pdf") == "next.pdf"
        assert reader.started == 2


def test_a_file_past_the_memory_limit_is_reported(tmp_path: Path) -> None:
    with IsolatedReader(f"{READERS}:hungry", timeout_s=10, memory_mb=200) as reader:
        issue = reader(tmp_path / "bomb.pdf")
        assert isinstance(issue, ReadIssue)
        assert issue.reason == "exceeded the 200 MiB memory limit (index.file_memory_mb); skipped"
        reader.read = f"{READERS}:echo"
        assert reader(tmp_path / "after.pdf") == "after.pdf" and reader.started == 2


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("segfault", "the reading process died of SIGSEGV; skipped"),
        ("exits", "the reading process exited (code 3); skipped"),
        ("raises", "reader failed: RuntimeError: cannot cope with x.pdf"),
        ("missing", "the reader tests.corpus.hostile_readers:missing does not start: AttributeError"),
    ],
)
def test_a_reader_that_dies_or_raises_is_reported(tmp_path: Path, name: str, reason: str) -> None:
    with IsolatedReader(f"{READERS}:{name}", timeout_s=10, memory_mb=None) as reader:
        issue = reader(tmp_path / "x.pdf")
    assert isinstance(issue, ReadIssue) and issue.reason.startswith(reason)


def test_a_worker_killed_between_files_is_replaced(tmp_path: Path) -> None:
    with IsolatedReader(f"{READERS}:echo", timeout_s=10, memory_mb=None) as reader:
        assert reader(tmp_path / "a.pdf") == "a.pdf"
        assert reader._proc is not None
        reader._proc.kill()
        reader._proc.wait()
        assert reader(tmp_path / "b.pdf") == "b.pdf" and reader.started == 2


def test_real_pdfs_read_the_same_isolated(tmp_path: Path) -> None:
    pdf = tmp_path / "p.pdf"
    pdf.write_bytes(make_pdf(["Kinase signalling in zebrafish fins, 2019."], title="Fin kinases in fish"))
    settings = IndexSettings(file_timeout_s=30, file_memory_mb=1024)
    with pdf_reader(settings) as reader:
        doc = reader(pdf)
    assert isinstance(doc, Document) and doc.paper.title == "Fin kinases in fish"
    assert "Kinase" in doc.pages[0].text


def test_no_limits_reads_in_process() -> None:
    reader = pdf_reader(IndexSettings(file_timeout_s=None, file_memory_mb=None))
    assert not isinstance(reader, IsolatedReader)


def test_an_enormous_page_count_cannot_hang_a_read(tmp_path: Path) -> None:
    started = time.perf_counter()
    pdf = tmp_path / "huge.pdf"
    pdf.write_bytes(many_pages_pdf(20_000))  # 3 MB, ~25 s for pypdf to read in full
    assert time.perf_counter() - started < 0.5
    with pdf_reader(IndexSettings(file_timeout_s=0.5, file_memory_mb=1024)) as reader:
        issue = reader(pdf)
    assert isinstance(issue, ReadIssue) and issue.reason.startswith("took longer than 0.5 s")


def test_a_build_reports_a_slow_pdf_and_indexes_the_rest(tmp_path: Path, settings: Settings) -> None:
    papers = tmp_path / "papers"
    papers.mkdir()
    (papers / "slow.pdf").write_bytes(slow_text_pdf())  # minutes of pypdf
    (papers / "good.pdf").write_bytes(make_pdf(["Axolotl limbs regrow after amputation (2020)."]))
    (papers / "good.md").write_text("# Fin regeneration\n\nZebrafish regrow fins within weeks. " * 3)
    settings = settings.with_overrides(index__file_timeout_s=0.5)
    report = build_index([papers], tmp_path / "idx", settings)
    assert [(Path(i.source).name, i.reason) for i in report.failed] == [
        ("slow.pdf", "took longer than 0.5 s to read (index.file_timeout_s); skipped")
    ]
    assert sorted(Path(p.source).name for p in Library.open(tmp_path / "idx").papers) == [
        "good.md",
        "good.pdf",
    ]
