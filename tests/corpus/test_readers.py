import gzip
import json
from pathlib import Path

import pypdf
import pytest

from agent.core.models import Document, ReadIssue
from corpus.keys import CitationKeys
from corpus.readers import MAX_FILE_BYTES, find_doi, read_path
from tests.corpus.pdfs import make_pdf


def read_one(path: Path, *, max_bytes: int = MAX_FILE_BYTES) -> Document | ReadIssue:
    results = list(read_path(path, max_bytes=max_bytes))
    assert len(results) == 1
    return results[0]


def test_pdf_keeps_pages_metadata_and_doi(tmp_path: Path) -> None:
    pdf = tmp_path / "paper.pdf"
    pdf.write_bytes(
        make_pdf(
            ["EGFR mutations in lung cancer\ndoi:10.1234/abc.5678\nWe study T790M.", "Results on page two."],
            title="EGFR mutations in lung cancer",
            author="Kyle Lo; Lucy Wang",
        )
    )
    doc = read_one(pdf)
    assert isinstance(doc, Document)
    assert [p.number for p in doc.pages] == [1, 2]
    assert "T790M" in doc.pages[0].text and "page two" in doc.pages[1].text
    assert doc.paper.title == "EGFR mutations in lung cancer"
    assert doc.paper.authors == ["Kyle Lo", "Lucy Wang"]
    assert doc.paper.doi == "10.1234/abc.5678"
    assert doc.paper.n_pages == 2 and len(doc.paper.doc_id) == 16


def test_one_unreadable_page_never_drops_the_document(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pdf = tmp_path / "p.pdf"
    pdf.write_bytes(make_pdf(["Good first page about kinases.", "Broken page.", "Good third page."]))
    real = pypdf.PageObject.extract_text
    calls = {"n": 0}

    def flaky(self: pypdf.PageObject, *a: object, **k: object) -> str:
        calls["n"] += 1
        if calls["n"] == 2:
            raise ValueError("bad content stream")
        return real(self, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(pypdf.PageObject, "extract_text", flaky)
    doc = read_one(pdf)
    assert isinstance(doc, Document)
    assert [p.text != "" for p in doc.pages] == [True, False, True]
    assert doc.warnings and "page 2" in doc.warnings[0].source and not doc.warnings[0].fatal


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "empty file"),
        (b"%PDF-1.4\nthis is not really a pdf at all", "corrupt PDF"),
        (make_pdf(["", ""]), "no extractable text"),
    ],
)
def test_bad_pdfs_are_reported_with_the_reason(tmp_path: Path, content: bytes, reason: str) -> None:
    pdf = tmp_path / "bad.pdf"
    pdf.write_bytes(content)
    issue = read_one(pdf)
    assert isinstance(issue, ReadIssue)
    assert reason in issue.reason and issue.source == str(pdf) and issue.fatal


def test_encrypted_pdf_is_reported(tmp_path: Path) -> None:
    src = tmp_path / "plain.pdf"
    src.write_bytes(make_pdf(["secret text"]))
    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(src))
    writer.encrypt(user_password="pw", owner_password="owner")
    enc = tmp_path / "enc.pdf"
    with enc.open("wb") as fh:
        writer.write(fh)
    issue = read_one(enc)
    assert isinstance(issue, ReadIssue) and "encrypted" in issue.reason


def test_missing_unsupported_and_huge_files(tmp_path: Path) -> None:
    missing = read_one(tmp_path / "nope.pdf")
    assert isinstance(missing, ReadIssue) and missing.reason == "no such file"
    odd = tmp_path / "x.docx"
    odd.write_bytes(b"data")
    unsupported = read_one(odd)
    assert isinstance(unsupported, ReadIssue) and "unsupported file type .docx" in unsupported.reason
    big = tmp_path / "big.txt"
    big.write_text("word " * 1000)
    huge = read_one(big, max_bytes=100)
    assert isinstance(huge, ReadIssue) and "too large" in huge.reason


def test_non_utf8_text_is_decoded_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "latin.txt"
    path.write_bytes("Café résumé: β-catenin in 2019.".encode("cp1252", errors="replace"))
    doc = read_one(path)
    assert isinstance(doc, Document)
    assert "Café" in doc.text
    assert doc.paper.year == 2019
    assert any("not UTF-8" in w.reason for w in doc.warnings)


def test_markdown_and_html(tmp_path: Path) -> None:
    md = tmp_path / "notes.md"
    md.write_text("# Kinase inhibitors\n\nOsimertinib is active against T790M.")
    doc = read_one(md)
    assert isinstance(doc, Document) and doc.paper.title == "Kinase inhibitors"
    assert doc.paper.n_pages is None and len(doc.pages) == 1  # one page to hold it, none to cite
    html = tmp_path / "page.html"
    html.write_text(
        "<html><head><title>TP53 review</title><script>alert('x')</script></head>"
        "<body><p>TP53 is a tumour suppressor.</p><style>p{}</style><p>Second &amp; last.</p></body></html>"
    )
    doc = read_one(html)
    assert isinstance(doc, Document)
    assert doc.paper.title == "TP53 review"
    assert "alert" not in doc.text and "p{}" not in doc.text
    assert "TP53 is a tumour suppressor." in doc.text and "Second & last." in doc.text


def test_jsonl_bad_lines_are_reported_and_the_rest_is_read(tmp_path: Path) -> None:
    path = tmp_path / "corpus.jsonl.gz"
    rows = [
        json.dumps({"doc_id": "pubmed:1", "title": None, "text": "First abstract.", "year": "2011"}),
        "{not json",
        json.dumps({"doc_id": "pubmed:2", "text": ""}),
        json.dumps(
            {"doc_id": "x:3", "title": "Third", "text": "Third text.", "doi": "https://doi.org/10.1/ABC"}
        ),
    ]
    with gzip.open(path, "wt") as fh:
        fh.write("\n".join(rows) + "\n")
    results = list(read_path(path))
    docs = [r for r in results if isinstance(r, Document)]
    issues = [r for r in results if isinstance(r, ReadIssue)]
    assert [d.paper.doc_id for d in docs] == ["pubmed:1", "x:3"]
    assert docs[0].paper.year == 2011 and docs[0].paper.title is None
    assert docs[0].paper.n_pages is None
    assert docs[1].paper.doi == "10.1/abc"
    assert [i.source for i in issues] == [f"{path}:2", f"{path}:3"]
    assert "not JSON" in issues[0].reason and "no 'text'" in issues[1].reason


CORD_TEXT = (
    "First Complete Genome Sequence of a French Bovine coronavirus Strain\n\n"
    "https://www.ncbi.nlm.nih.gov/pmc/articles/PMC5477389/\n\n"
    "SHA: eef0ecf5b8e7b179dadaef967e65f2ab68f021e1\n\n"
    "Authors: Kin, Nathalie; Guerard, Pauline; Diancourt, Laure\n"
    "Date: 2017-05-25\n"
    "DOI: 10.1128/genomea.00319-17\n"
    "License: cc-by\n\n"
    "Abstract: We sequenced the first Bovine coronavirus (BCoV) complete genome sequence from France."
)


def _read_rows(tmp_path: Path, *rows: dict[str, object]) -> list[Document]:
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    docs = list(read_path(path))
    assert all(isinstance(d, Document) for d in docs)
    return [d for d in docs if isinstance(d, Document)]


def test_jsonl_reads_authors_year_and_doi_from_a_cord19_header(tmp_path: Path) -> None:
    (doc,) = _read_rows(
        tmp_path, {"doc_id": "covidqa:1546", "title": "First Complete Genome", "text": CORD_TEXT}
    )
    paper = doc.paper
    assert paper.authors == ["Kin, Nathalie", "Guerard, Pauline", "Diancourt, Laure"]
    assert (paper.year, paper.doi) == (2017, "10.1128/genomea.00319-17")
    assert CitationKeys().assign(paper) == "Kin2017"
    assert doc.text == CORD_TEXT  # the header stays in the text


def test_jsonl_fields_the_record_gives_beat_its_header(tmp_path: Path) -> None:
    row = {"doc_id": "x:1", "text": CORD_TEXT, "authors": ["Lo, Kyle"], "year": 2020, "doi": "10.1/OWN"}
    (doc,) = _read_rows(tmp_path, row)
    assert (doc.paper.authors, doc.paper.year, doc.paper.doi) == (["Lo, Kyle"], 2020, "10.1/own")
    # only the missing field is taken from the header
    (doc,) = _read_rows(tmp_path, {"doc_id": "x:2", "text": CORD_TEXT, "authors": "Lo, Kyle"})
    assert (doc.paper.authors, doc.paper.year) == (["Lo, Kyle"], 2017)


def test_jsonl_without_a_header_is_unchanged(tmp_path: Path) -> None:
    text = "Beyond the spike. Authors: see the end.\nWe study BCoV, https://doi.org/10.1/abc, in 2014."
    (doc,) = _read_rows(tmp_path, {"doc_id": "x:3", "title": "Beyond the spike", "text": text})
    assert (doc.paper.authors, doc.paper.year, doc.paper.doi) == ([], None, None)
    assert CitationKeys().assign(doc.paper) == "Beyondnd"


def test_find_doi() -> None:
    assert find_doi("see https://doi.org/10.1038/nature12373.") == "10.1038/nature12373"
    assert find_doi("10.1/a and 10.2/b", unique=True) is None
    assert find_doi("no doi here") is None


def test_citation_keys_are_unique_and_readable() -> None:
    from agent.core.models import Paper

    keys = CitationKeys()
    assert keys.assign(Paper(doc_id="a", authors=["Kyle Lo"], year=2020)) == "Lo2020"
    assert keys.assign(Paper(doc_id="b", authors=["Lo, Kyle"], year=2020)) == "Lo2020b"
    assert keys.assign(Paper(doc_id="c", title="Deep venous thrombosis", year=None)) == "Deepnd"
    assert keys.assign(Paper(doc_id="pubmed:21645374")) == "Pubmed21645374"


@pytest.mark.data
def test_the_shared_pdfs_all_read(shared_data: Path) -> None:
    pdfs = sorted((shared_data / "papers").glob("*.pdf"))
    assert len(pdfs) == 9
    for pdf in pdfs:
        doc = read_one(pdf)
        assert isinstance(doc, Document), doc
        assert doc.paper.n_pages and doc.paper.n_pages >= 4
        assert sum(len(p.text) for p in doc.pages) > 10_000


def test_a_title_broken_over_two_lines_is_joined() -> None:
    from corpus.pdf import _guess_title

    page = (
        "Proceedings of the 17th Conference, pages 1650-1669\n"
        "LONGEVAL: Guidelines for Human Evaluation of\n"
        "Faithfulness in Long-form Summarization\n"
        "Kalpesh Krishna Erin Bransom\n"
    )
    assert (
        _guess_title(page)
        == "LONGEVAL: Guidelines for Human Evaluation of Faithfulness in Long-form Summarization"
    )
    # a next line that starts in lower case continues the title (Clinical Science, 2014)
    lines = [
        "Fragment-based design for the development",
        "of N-domain-selective angiotensin-1-converting",
        "enzyme inhibitors",
        "Ross G. DOUGLAS, Rajni K. SHARMA",
    ]
    assert _guess_title("\n".join(lines)) == " ".join(lines[:3])
    # a complete title line is not run on into the authors
    assert _guess_title("S2ORC: The Semantic Scholar Open Research Corpus\nKyle Lo Lucy Lu Wang\n") == (
        "S2ORC: The Semantic Scholar Open Research Corpus"
    )
