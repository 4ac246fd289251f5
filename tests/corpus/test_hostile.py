"""A folder of bad files: each is reported with its file and reason, the rest is indexed."""

import io
import os
from pathlib import Path

import pypdf

from agent.core.settings import Settings
from corpus.build import build_index
from corpus.store import Library
from tests.corpus.pdfs import make_pdf

GOOD = "Zebrafish regenerate their fins within two weeks of amputation in 2019. " * 4


def _encrypted_pdf() -> bytes:
    writer = pypdf.PdfWriter(clone_from=io.BytesIO(make_pdf(["Secret kinase results."])))
    writer.encrypt("a password", algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def make_hostile_folder(tmp_path: Path) -> Path:
    """Bad files beside good ones; returns the folder to index."""
    papers = tmp_path / "papers"
    papers.mkdir()
    (papers / "good.md").write_text("# Fin regeneration in zebrafish\n\n" + GOOD)
    (papers / "good.txt").write_text("Axolotl limbs regrow after loss, as seen in 2020. " * 4)
    (papers / "new\nline.txt").write_text("Planarians rebuild whole bodies from fragments (2018). " * 4)
    (papers / "latin1.txt").write_bytes(("Café résumé about naïve T cells in 2017. " * 4).encode("latin-1"))
    pdf = make_pdf(["A PDF about kinase signalling that is cut off half way through."])
    (papers / "truncated.pdf").write_bytes(pdf[: len(pdf) // 2])
    (papers / "encrypted.pdf").write_bytes(_encrypted_pdf())
    (papers / "empty.pdf").write_bytes(b"")
    (papers / "page.pdf").write_text("<html><body><p>Not a PDF at all, a saved web page.</p></body></html>")
    (papers / "folder.pdf").mkdir()  # a directory with a paper's name: not a file, passed over
    (papers / "records.jsonl").write_text(
        '{"doc_id": "r:1", "text": "Hydra never age, per a 2015 study."}\n'
        "this line is not JSON\n"
        '{"doc_id": "r:2", "title": "No text here"}\n'
        '{"doc_id": "r:3", "text": "Authors given as a number.", "authors": 5}\n'
        "[1, 2, 3]\n"
        '{"doc_id": "r:4", "text": "Starfish regrow arms (2012).", "authors": "Ann Lee"}\n'
    )
    secret = tmp_path / "private" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("PRIVATE KEY MATERIAL that must never be indexed from a papers folder. " * 3)
    os.symlink(secret, papers / "leak.txt")
    os.symlink(tmp_path / "nowhere.md", papers / "gone.md")
    os.symlink("loop.md", papers / "loop.md")
    os.symlink("good.md", papers / "inside.md")  # a link within the folder is fine (a duplicate here)
    return papers


def test_build_over_hostile_files_reports_each_and_indexes_the_rest(
    tmp_path: Path, settings: Settings
) -> None:
    papers = make_hostile_folder(tmp_path)
    report = build_index([papers], tmp_path / "idx", settings)  # no exception escapes

    failed = {Path(issue.source).name: issue.reason for issue in report.failed}
    assert failed.keys() == {
        "truncated.pdf",
        "encrypted.pdf",
        "empty.pdf",
        "page.pdf",
        "records.jsonl:2",
        "records.jsonl:3",
        "records.jsonl:4",
        "records.jsonl:5",
        "leak.txt",
        "gone.md",
        "loop.md",
    }, failed
    assert "PDF" in failed["truncated.pdf"] and "PDF" in failed["page.pdf"]
    assert failed["encrypted.pdf"] == "encrypted PDF (needs a password)"
    assert failed["empty.pdf"] == "empty file (0 bytes)"
    assert failed["records.jsonl:2"].startswith("not JSON")
    assert failed["records.jsonl:3"] == failed["records.jsonl:5"] == "no 'text' field"
    assert failed["records.jsonl:4"].startswith("bad record: TypeError")
    assert "outside the scanned folder" in failed["leak.txt"]
    assert failed["gone.md"].startswith("broken symlink")
    assert failed["loop.md"] == "symlink loop"
    assert all(issue.fatal for issue in report.failed)

    lib = Library.open(tmp_path / "idx")
    names = sorted(Path(p.source).name for p in lib.papers)
    assert names == sorted(
        ["good.md", "good.txt", "new\nline.txt", "latin1.txt", "records.jsonl", "records.jsonl"]
    )
    assert report.indexed == 6 and report.chunks == len(lib.chunks)
    assert [Path(s.source.split(" [")[0]).name for s in report.skipped] == ["inside.md"]
    assert any("not UTF-8" in w.reason for w in report.warnings)
    assert next(p for p in lib.papers if p.doc_id == "r:4").authors == ["Ann Lee"]
    assert not any("PRIVATE KEY" in c.text for c in lib.chunks)


def test_a_linked_file_named_explicitly_is_read(tmp_path: Path, settings: Settings) -> None:
    papers = make_hostile_folder(tmp_path)
    report = build_index([papers / "leak.txt"], tmp_path / "idx", settings)
    assert report.indexed == 1 and not report.failed


def test_unicode_line_separators_in_text_survive_a_reopen(tmp_path: Path, settings: Settings) -> None:
    # U+2028 and U+0085 stay raw in the JSON lines; splitting them there would tear a record.
    odd = tmp_path / "odd.txt"
    odd.write_text("Line\u2028separated and next\u0085line text about kinases in 2021. " * 4)
    report = build_index([odd], tmp_path / "idx", settings)
    lib = Library.open(tmp_path / "idx")
    assert report.indexed == 1 and len(lib.chunks) == report.chunks
    assert "\u2028" in lib.chunks[0].text


def test_names_and_text_json_cannot_hold_are_escaped_not_fatal(tmp_path: Path, settings: Settings) -> None:
    # A Latin-1 file name on a UTF-8 system, and a JSON record with a lone surrogate escape:
    # Python holds both as surrogates, which the library's UTF-8 JSON cannot store.
    papers = tmp_path / "papers"
    papers.mkdir()
    latin1_name = os.fsencode(papers) + b"/caf\xe9.md"
    Path(os.fsdecode(latin1_name)).write_text("# Cafe study\n\n" + GOOD)
    (papers / "records.jsonl").write_text(
        '{"doc_id": "s:1", "title": "Half \\ud800 pair", "text": "Lone \\udfff surrogate, kinases 2019."}\n'
        '{"doc_id": "s:2", "text": "A NUL \\u0000 inside a record about fins (2018)."}\n'
    )
    report = build_index([papers], tmp_path / "idx", settings)
    assert report.indexed == 3 and not report.failed
    lib = Library.open(tmp_path / "idx")
    sources = sorted(p.source for p in lib.papers)
    assert str(papers / "caf\\xe9.md") in sources
    assert any("not UTF-8" in w.reason and "caf\\xe9" in w.source for w in report.warnings)
    record = next(p for p in lib.papers if p.doc_id == "s:1")
    assert record.title == "Half \ufffd pair"
    assert any("Lone \ufffd surrogate" in c.text for c in lib.chunks)
    report.model_dump_json()  # what `index build --json` prints


def test_a_name_with_a_nul_byte_is_reported_not_raised(tmp_path: Path, settings: Settings) -> None:
    # No file system holds such a name, but the Python API can be handed one.
    report = build_index([tmp_path / "bad\x00name.pdf"], tmp_path / "idx", settings)
    assert [(Path(i.source).name, i.reason) for i in report.failed] == [("bad\x00name.pdf", "no such file")]


def test_binary_text_files_are_refused_and_utf16_is_read(tmp_path: Path, settings: Settings) -> None:
    (tmp_path / "binary.txt").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "utf16.txt").write_bytes(("Zebrafish fins regrow, 2016. " * 8).encode("utf-16"))
    report = build_index([tmp_path / "binary.txt", tmp_path / "utf16.txt"], tmp_path / "idx", settings)
    assert [(Path(i.source).name, i.reason) for i in report.failed] == [
        ("binary.txt", "binary data, not text (NUL bytes in the first 8 KB)")
    ]
    (paper,) = Library.open(tmp_path / "idx").papers
    assert Path(paper.source).name == "utf16.txt" and not report.warnings


def test_a_truncated_gzip_corpus_is_counted_and_reported(tmp_path: Path, settings: Settings) -> None:
    import gzip

    from corpus.build import count_documents

    data = gzip.compress(b'{"doc_id": "a", "text": "Kinases in fins (2019)."}\n' * 100)
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(data[: len(data) // 2])
    assert count_documents([cut]) >= 1  # the progress bar's count does not raise
    report = build_index([cut], tmp_path / "idx", settings)
    assert report.failed[-1].reason.startswith("unreadable corpus file: EOFError")
