"""Each kind of hostile PDF gets a reason that says what is wrong with it (read in-process here;
the kinds that need a time or memory limit are in test_isolate.py)."""

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from agent.core.models import Document, ReadIssue
from corpus.readers import read_path
from tests.corpus import hostile_pdfs as hostile


def read_one(path: Path) -> Document | ReadIssue:
    (result,) = read_path(path)
    return result


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (hostile.encrypted_pdf, "encrypted PDF (needs a password)"),
        (hostile.image_only_pdf, "no extractable text (image-only or empty PDF; OCR is not supported)"),
        (
            hostile.nested_arrays_pdf,
            "corrupt PDF: objects nested too deeply to read (PdfReadError: RecursionError)",
        ),
        (hostile.page_tree_loop_pdf, "corrupt PDF: PdfReadError: Detected cyclic page references."),
        (
            hostile.flate_bomb_pdf,
            "no extractable text (image-only or empty PDF; OCR is not supported; 1 of 1 pages failed, "
            "first: LimitReachedError: Limit reached while decompressing.",
        ),
    ],
)
def test_a_hostile_pdf_is_reported_with_what_is_wrong(
    tmp_path: Path, make: Callable[[], bytes], reason: str
) -> None:
    pdf = tmp_path / "hostile.pdf"
    pdf.write_bytes(make())
    issue = read_one(pdf)
    assert isinstance(issue, ReadIssue) and issue.fatal and issue.source == str(pdf)
    assert issue.reason.startswith(reason), issue.reason


@pytest.mark.parametrize("make", [hostile.lying_count_pdf, lambda: hostile.nested_dicts_pdf(20_000)])
def test_a_pdf_that_only_looks_hostile_is_read(tmp_path: Path, make: Callable[[], bytes]) -> None:
    # A page count of 2**31-1 over one real page; a dictionary 20,000 deep that no page needs
    # (100,000 deep reads the same, in ~1 s: benchmarks/hostile.py).
    pdf = tmp_path / "odd.pdf"
    pdf.write_bytes(make())
    doc = read_one(pdf)
    assert isinstance(doc, Document) and doc.paper.n_pages == 1
    assert "zebrafish" in doc.pages[0].text


def test_the_big_hostile_files_are_cheap_to_make() -> None:
    started = time.perf_counter()
    sizes = {
        "pages": len(hostile.many_pages_pdf(20_000)),
        "memory": len(hostile.memory_bomb_pdf(n_pages=4)),
        "slow": len(hostile.slow_text_pdf()),
    }
    assert time.perf_counter() - started < 5
    assert sizes["pages"] < 4_000_000 and sizes["memory"] < 500_000 and sizes["slow"] < 100_000, sizes


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"<!DOCTYPE html><html><p>A saved web page.</p></html>", "it is an HTML page"),
        (b"\x89PNG\r\n\x1a\n" + bytes(64), "it is a PNG image"),
        (b"PK\x03\x04" + bytes(64), "it is a ZIP archive"),
        (b"plain words, no header", "not a PDF: no %PDF- header"),
    ],
)
def test_a_file_named_pdf_that_is_something_else_says_what_it_is(
    tmp_path: Path, content: bytes, reason: str
) -> None:
    pdf = tmp_path / "paper.pdf"
    pdf.write_bytes(content)
    issue = read_one(pdf)
    assert isinstance(issue, ReadIssue) and issue.reason.startswith("not a PDF") and reason in issue.reason


def test_a_truncated_pdf_says_it_looks_truncated(tmp_path: Path) -> None:
    whole = hostile.many_pages_pdf(3)
    pdf = tmp_path / "cut.pdf"
    pdf.write_bytes(whole[: len(whole) * 2 // 3])
    issue = read_one(pdf)
    assert isinstance(issue, ReadIssue) and issue.reason.endswith("(no %EOF at the end: truncated?)")
