"""Readers: PDF, plain text, Markdown, HTML and JSONL corpora into :class:`Document`.

Bad input never stops a build. An unreadable file becomes a fatal :class:`ReadIssue` naming the
file and the reason. A bad JSONL line is reported with its line number, and the reader goes on
to the next line. PDFs are read by :mod:`corpus.pdf` (in a build, in a worker process).

Only PDFs have pages. A text, Markdown or HTML file and a JSONL record are read as one
:class:`Page` but get ``n_pages=None``: their chunks carry no page range, so their passages are
cited by key alone (``Lo2020``), never by a made-up "p. 1".
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Callable, Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from agent.core.models import Document, Page, Paper, ReadIssue
from corpus.metadata import YEAR, ReadResult, content_hash, find_doi, source_name
from corpus.pdf import read_pdf

__all__ = [
    "MAX_FILE_BYTES",
    "SUPPORTED_SUFFIXES",
    "ReadResult",
    "find_doi",
    "read_path",
    "read_pdf",
    "source_name",
]

MAX_FILE_BYTES = 200 * 1024 * 1024
SUPPORTED_SUFFIXES = {".pdf", ".txt", ".md", ".html", ".htm", ".jsonl", ".jsonl.gz"}
_SURROGATE = re.compile("[\ud800-\udfff]")


def _valid_unicode(text: str) -> str:
    """Lone surrogates (a JSON ``\\ud800`` escape, a broken UTF-16 string in a PDF) become
    U+FFFD: the library is stored as UTF-8 JSON, which cannot hold them, and one would fail the
    whole build's commit."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


def _scrub(doc: Document) -> Document:
    paper = doc.paper
    for field in ("doc_id", "title", "doi", "venue", "source"):
        value = getattr(paper, field)
        if isinstance(value, str):
            setattr(paper, field, _valid_unicode(value))
    paper.authors = [_valid_unicode(a) for a in paper.authors]
    for page in doc.pages:
        page.text = _valid_unicode(page.text)
    return doc


def _suffix(path: Path) -> str:
    name = path.name.lower()
    return ".jsonl.gz" if name.endswith(".jsonl.gz") else path.suffix.lower()


def _decode(data: bytes, src: str, warnings: list[ReadIssue]) -> str:
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):  # UTF-16 with its BOM ("Unicode" text on Windows)
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            pass
    for encoding in ("utf-8", "utf-8-sig"):
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue
    warnings.append(ReadIssue(source=src, reason="not UTF-8; decoded as cp1252/latin-1", fatal=False))
    try:
        return data.decode("cp1252")
    except UnicodeDecodeError:
        return data.decode("latin-1")


class _TextExtractor(HTMLParser):
    _SKIP = frozenset({"script", "style", "noscript", "head"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title: str | None = None
        self._skip = 0
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        if tag in self._SKIP:
            self._skip += 1
        if tag in {"p", "br", "div", "li", "h1", "h2", "h3", "h4", "tr", "section"}:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        if tag in self._SKIP and self._skip:
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title = (self.title or "") + data.strip()
        elif not self._skip:
            self.parts.append(data)


def _read_text(path: Path, html: bool) -> ReadResult:
    src = source_name(path)
    warnings: list[ReadIssue] = []
    data = path.read_bytes()
    if b"\x00" in data[:8192] and not data.startswith((b"\xff\xfe", b"\xfe\xff")):
        # Text never holds NUL; without this a binary file (a PDF saved as .txt) is indexed as
        # pages of cp1252 noise.
        return ReadIssue(source=src, reason="binary data, not text (NUL bytes in the first 8 KB)")
    text = _decode(data, src, warnings)
    title: str | None = None
    if html:
        parser = _TextExtractor()
        parser.feed(text)
        text, title = "".join(parser.parts), parser.title
    text = re.sub(r"[ \t]+\n", "\n", re.sub(r"\n{3,}", "\n\n", text)).strip()
    if not text:
        return ReadIssue(source=src, reason="no text")
    if title is None and path.suffix.lower() == ".md":
        heading = re.search(r"^#\s+(.+)$", text, re.MULTILINE)
        title = heading.group(1).strip() if heading else None
    year = YEAR.search(text[:2000])
    paper = Paper(
        doc_id="",
        title=title or path.stem.replace("_", " "),
        year=int(year.group(1)) if year else None,
        doi=find_doi(text[:5000], unique=True),
        source=src,
        content_hash=content_hash(text),
        n_pages=None,  # one Page to hold the text, but no pages to cite
    )
    return Document(paper=paper, pages=[Page(number=1, text=text)], warnings=warnings)


def _read_jsonl(path: Path) -> Iterator[ReadResult]:
    """One document a line: ``{"doc_id", "title"?, "text", "authors"?, "doi"?, "year"?, "source"?}``.

    Authors, year and DOI a record lacks are read from a CORD-19 header in its text, if any."""
    opener = gzip.open if _suffix(path) == ".jsonl.gz" else open
    src = source_name(path)
    try:
        with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                where = f"{src}:{lineno}"
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    yield ReadIssue(source=where, reason=f"not JSON: {exc.msg}")
                    continue
                if not isinstance(row, dict) or not str(row.get("text") or "").strip():
                    yield ReadIssue(source=where, reason="no 'text' field")
                    continue
                try:
                    yield _record(row, path)
                except (TypeError, ValueError) as exc:  # a wrongly typed field spoils its line only
                    yield ReadIssue(source=where, reason=f"bad record: {type(exc).__name__}: {exc}")
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        yield ReadIssue(source=src, reason=f"unreadable corpus file: {type(exc).__name__}: {exc}")


# CORD-19 texts (COVID-QA) open with "Authors: Kin, Nathalie; Guerard, Pauline", "Date: 2017-05-25"
# and "DOI: 10.1128/..." lines, though their records hold only doc_id, title and text.
_CORD_FIELD = re.compile(r"^(Authors|Date|DOI):[ \t]*(.*)$", re.MULTILINE)


def _cord_header(text: str) -> dict[str, str]:
    """The first ``Authors:``, ``Date:`` and ``DOI:`` line values in the first 2,000 characters."""
    found: dict[str, str] = {}
    for match in _CORD_FIELD.finditer(text[:2000]):
        found.setdefault(match.group(1), match.group(2).strip())
    return found


def _record(row: dict[str, Any], path: Path) -> Document:
    text = str(row["text"]).strip()
    doc_id = str(row.get("doc_id") or content_hash(text)[:16])
    header = _cord_header(text)  # fills only the fields the record leaves out
    date_year = re.search(r"\b(\d{4})\b", header.get("Date", ""))
    year = row.get("year") or (date_year.group(1) if date_year else None)
    authors = row.get("authors") or [a.strip() for a in header.get("Authors", "").split(";") if a.strip()]
    if isinstance(authors, str):  # one name, not a list of one-letter names
        authors = [authors]
    doi = str(row["doi"]) if row.get("doi") else find_doi(header.get("DOI", ""))
    paper = Paper(
        doc_id=doc_id,
        title=(str(row["title"]).strip() or None) if row.get("title") not in (None, "None") else None,
        authors=[str(a) for a in authors],
        year=int(year) if isinstance(year, int | str) and str(year).isdigit() else None,
        doi=doi.lower().removeprefix("https://doi.org/") if doi else None,
        venue=str(row["venue"]) if row.get("venue") else None,
        source=str(row.get("source") or source_name(Path(path.name))),
        content_hash=content_hash(text),
        abstract_only=bool(row.get("abstract_only", False)),
        n_pages=None,
    )
    return Document(paper=paper, pages=[Page(number=1, text=text)])


def read_path(
    path: Path,
    *,
    max_bytes: int = MAX_FILE_BYTES,
    pdf_reader: Callable[[Path], ReadResult] | None = None,
) -> Iterator[ReadResult]:
    """Read one file (a JSONL corpus yields many documents). Never raises for bad input.

    ``pdf_reader`` reads PDFs instead of :func:`read_pdf` in this process: a build passes one
    from :func:`corpus.isolate.pdf_reader`, which bounds each file's time and memory. Text,
    HTML and JSONL readers are linear in the file and stay in-process.
    """
    src = source_name(path)
    if not path.exists():
        yield ReadIssue(source=src, reason="no such file")
        return
    if not path.is_file():
        yield ReadIssue(source=src, reason="not a regular file")
        return
    suffix = _suffix(path)
    if suffix not in SUPPORTED_SUFFIXES:
        yield ReadIssue(source=src, reason=f"unsupported file type {suffix or '(none)'}")
        return
    size = path.stat().st_size
    if size == 0:
        yield ReadIssue(source=src, reason="empty file (0 bytes)")
        return
    if size > max_bytes and suffix not in {".jsonl", ".jsonl.gz"}:
        yield ReadIssue(source=src, reason=f"file too large ({size / 1e6:.0f} MB > {max_bytes / 1e6:.0f} MB)")
        return
    if suffix in {".jsonl", ".jsonl.gz"}:
        for record in _read_jsonl(path):
            yield _scrub(record) if isinstance(record, Document) else record
        return
    try:
        if suffix == ".pdf":
            result = (pdf_reader or read_pdf)(path)
        else:
            result = _read_text(path, html=suffix in {".html", ".htm"})
    except OSError as exc:
        result = ReadIssue(source=src, reason=f"cannot read: {exc}")
    except MemoryError:  # in-process only: an isolated reader turns it into its limit's reason
        result = ReadIssue(source=src, reason="ran out of memory reading it")
    if isinstance(result, Document):
        result.paper.doc_id = result.paper.content_hash[:16]
        _scrub(result)
        if src != str(path):
            result.warnings.append(
                ReadIssue(source=src, reason="file name is not UTF-8; recorded with \\x escapes", fatal=False)
            )
    yield result
