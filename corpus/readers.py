"""Readers: PDF, plain text, Markdown, HTML and JSONL corpora into :class:`Document`.

Bad input never stops a build. An unreadable file becomes a fatal :class:`ReadIssue` naming the
file and the reason. An unreadable page becomes a non-fatal warning and its document is kept.
A bad JSONL line is reported with its line number, and the reader goes on to the next line.

:func:`read_pdf` lets ``MemoryError`` through (every other exception becomes a reason): in a
:mod:`corpus.isolate` worker it means the worker's memory limit was hit, and the worker says so.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import os
import re
from collections.abc import Callable, Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from agent.core.models import Document, Page, Paper, ReadIssue

__all__ = [
    "MAX_FILE_BYTES",
    "SUPPORTED_SUFFIXES",
    "CitationKeys",
    "ReadResult",
    "find_doi",
    "read_path",
    "read_pdf",
    "source_name",
]

MAX_FILE_BYTES = 200 * 1024 * 1024
SUPPORTED_SUFFIXES = {".pdf", ".txt", ".md", ".html", ".htm", ".jsonl", ".jsonl.gz"}
_DOI = re.compile(r"\b(10\.\d{4,9}/[^\s\"<>]+)", re.IGNORECASE)
_YEAR = re.compile(r"\b(19[5-9]\d|20[0-4]\d)\b")
_SURROGATE = re.compile("[\ud800-\udfff]")

ReadResult = Document | ReadIssue

# pypdf logs a warning per font it cannot fully decode; the text is still extracted.
logging.getLogger("pypdf").setLevel(logging.ERROR)


_HEADER = re.compile(
    r"(?i)\b(vol|volume|issn|doi|http|journal|copyright|page|proceedings|submitted|received|"
    r"accepted|published|research article|open access)\b|©"
)


def _plausible_title(title: str) -> bool:
    return len(re.findall(r"[A-Za-z]{2,}", title)) >= 3 and not _HEADER.search(title)


# A title line runs on to the next when it ends in one of these ("... Evaluation of" /
# "Faithfulness in Long-form Summarization") or the next line starts in lower case. Author
# lines start with a capital after a complete line, so they are not swallowed.
_RUNS_ON = re.compile(r"(?i)(\b(of|for|in|and|the|to|with|on|a|an|from|by|via|at)|[:\-–])$")


def _guess_title(first_page: str) -> str | None:
    """A title-like line near the top of page 1 (several words, not a journal header), with the
    lines it runs on to."""
    lines = [line.strip() for line in first_page.splitlines()[:15]]
    for i, line in enumerate(lines):
        words = line.split()
        if 4 <= len(words) <= 30 and not _DOI.search(line) and not _HEADER.search(line):
            title = line
            for nxt in lines[i + 1 : i + 5]:
                if not nxt or _HEADER.search(nxt) or _DOI.search(nxt) or len(nxt.split()) > 15:
                    break
                if not (_RUNS_ON.search(title) or nxt[0].islower()):
                    break
                title = f"{title} {nxt}"
            return title
    return None


def find_doi(text: str, *, unique: bool = False) -> str | None:
    """First DOI in ``text``, lower-cased, without trailing punctuation.

    ``unique=True`` returns None when several different DOIs appear (a reference list or a
    notes file, not one paper's own DOI).
    """
    found = [m.group(1).rstrip(".,;)]").lower() for m in _DOI.finditer(text)]
    if not found or (unique and len(set(found)) > 1):
        return None
    return found[0]


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()


def source_name(path: Path) -> str:
    """``str(path)``, with bytes that are not UTF-8 (a Latin-1 name on a UTF-8 system) written
    as ``\\xe9``: names are stored as JSON, which cannot hold the surrogates Python reads them as."""
    text = str(path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(path).decode("utf-8", "backslashreplace")
    return text


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


def _why(exc: BaseException) -> str:
    """``Type: message``, naming a RecursionError behind it (pypdf wraps it in a vaguer error)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, RecursionError):
            return f"objects nested too deeply to read ({type(exc).__name__}: RecursionError)"
        seen = seen.__cause__ or seen.__context__
    return f"{type(exc).__name__}: {exc}"


_MAGIC = {
    b"<!doctype html": "an HTML page",
    b"<html": "an HTML page",
    b"<?xml": "an XML file",
    b"\x89png": "a PNG image",
    b"\xff\xd8\xff": "a JPEG image",
    b"pk\x03\x04": "a ZIP archive (.docx, .epub?)",
    b"\x1f\x8b": "a gzip file",
}


def _not_a_pdf(path: Path) -> str | None:
    """Why a file named .pdf is not one, from its first bytes (pypdf would only say that a stream
    ended unexpectedly). Readers accept junk before the header within the first 1 KB, so do we."""
    with path.open("rb") as fh:
        head = fh.read(1024)
    if b"%PDF-" in head:
        return None
    start = head.lstrip().lower()
    what = next((name for magic, name in _MAGIC.items() if start.startswith(magic)), None)
    return f"not a PDF: no %PDF- header; it is {what}" if what else "not a PDF: no %PDF- header"


def _truncated(path: Path) -> bool:
    with path.open("rb") as fh:
        fh.seek(max(0, path.stat().st_size - 1024))
        return b"%%EOF" not in fh.read()


def read_pdf(path: Path) -> ReadResult:
    """One PDF as a document, or the reason it cannot be one. Only ``MemoryError`` escapes."""
    import pypdf
    import pypdf.errors

    src = source_name(path)
    if (reason := _not_a_pdf(path)) is not None:
        return ReadIssue(source=src, reason=reason)
    try:
        reader = pypdf.PdfReader(path)
        if reader.is_encrypted and not reader.decrypt(""):
            return ReadIssue(source=src, reason="encrypted PDF (needs a password)")
        raw_pages = list(reader.pages)
    except MemoryError:
        raise
    except pypdf.errors.FileNotDecryptedError:
        return ReadIssue(source=src, reason="encrypted PDF (needs a password)")
    except (pypdf.errors.PdfReadError, pypdf.errors.PdfStreamError, ValueError, KeyError, OSError) as exc:
        hint = " (no %EOF at the end: truncated?)" if _truncated(path) else ""
        return ReadIssue(source=src, reason=f"corrupt PDF: {_why(exc)}{hint}")
    except Exception as exc:  # pypdf raises many types on broken files; one bad file must not stop a build
        return ReadIssue(source=src, reason=f"unreadable PDF: {_why(exc)}")
    pages: list[Page] = []
    warnings: list[ReadIssue] = []
    for number, page in enumerate(raw_pages, 1):
        try:
            text = page.extract_text() or ""
        except MemoryError:
            raise
        except Exception as exc:  # one unreadable page never drops the document
            warnings.append(ReadIssue(source=f"{src} page {number}", reason=_why(exc), fatal=False))
            text = ""
        pages.append(Page(number=number, text=text.replace("\x00", "").strip()))
    if not any(p.text for p in pages):
        # Pages that failed say more than "no text" (e.g. pypdf's own inflate limit on a bomb).
        failed = (
            f"; {len(warnings)} of {len(pages)} pages failed, first: {warnings[0].reason}" if warnings else ""
        )
        return ReadIssue(
            source=src,
            reason=f"no extractable text (image-only or empty PDF; OCR is not supported{failed})",
        )
    meta: dict[str, Any] = {}
    try:
        meta = dict(reader.metadata or {})
    except MemoryError:
        raise
    except Exception:  # broken metadata is not worth losing the text over
        warnings.append(ReadIssue(source=src, reason="unreadable PDF metadata", fatal=False))
    head = "\n".join(p.text for p in pages[:2])
    title = str(meta.get("/Title") or "").strip()
    if not _plausible_title(title):
        title = _guess_title(pages[0].text if pages else "") or ""
    author = str(meta.get("/Author") or "").strip()
    author = re.sub(r"\{?et al\.?\}?", "", author)
    authors = [a.strip() for a in re.split(r";|,| and ", author) if a.strip()] if author else []
    year_match = _YEAR.search(str(meta.get("/CreationDate") or "")) or _YEAR.search(head[:3000])
    text = "\n\n".join(p.text for p in pages)
    paper = Paper(
        doc_id="",
        title=title or None,
        authors=authors,
        year=int(year_match.group(1)) if year_match else None,
        doi=find_doi(head),
        source=src,
        content_hash=_hash(text),
        n_pages=len(pages),
    )
    return Document(paper=paper, pages=pages, warnings=warnings)


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
    year = _YEAR.search(text[:2000])
    paper = Paper(
        doc_id="",
        title=title or path.stem.replace("_", " "),
        year=int(year.group(1)) if year else None,
        doi=find_doi(text[:5000], unique=True),
        source=src,
        content_hash=_hash(text),
        n_pages=1,
    )
    return Document(paper=paper, pages=[Page(number=1, text=text)], warnings=warnings)


def _read_jsonl(path: Path) -> Iterator[ReadResult]:
    """One document a line: ``{"doc_id", "title"?, "text", "doi"?, "year"?, "source"?}``."""
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


def _record(row: dict[str, Any], path: Path) -> Document:
    text = str(row["text"]).strip()
    doc_id = str(row.get("doc_id") or _hash(text)[:16])
    year = row.get("year")
    authors = row.get("authors") or []
    if isinstance(authors, str):  # one name, not a list of one-letter names
        authors = [authors]
    paper = Paper(
        doc_id=doc_id,
        title=(str(row["title"]).strip() or None) if row.get("title") not in (None, "None") else None,
        authors=[str(a) for a in authors],
        year=int(year) if isinstance(year, int | str) and str(year).isdigit() else None,
        doi=str(row["doi"]).lower().removeprefix("https://doi.org/") if row.get("doi") else None,
        venue=str(row["venue"]) if row.get("venue") else None,
        source=str(row.get("source") or source_name(Path(path.name))),
        content_hash=_hash(text),
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


class CitationKeys:
    """Allocates short citation keys unique in a library: ``Lo2020``, ``Lo2020b``, ``Lo2020c``."""

    def __init__(self, taken: set[str] | None = None) -> None:
        self.taken: set[str] = set(taken or ())

    @staticmethod
    def base(paper: Paper) -> str:
        if paper.authors:
            name = paper.authors[0].replace(",", " ").split()
            # "Lo, Kyle" → Lo; "Kyle Lo" → Lo
            stem = name[0] if "," in paper.authors[0] else name[-1]
        elif paper.title:
            words = [w for w in re.findall(r"[A-Za-z]+", paper.title) if len(w) > 3]
            stem = words[0] if words else "Doc"
        elif ":" in paper.doc_id:
            # untitled corpus records: a key that traces back to the record, e.g. Pubmed21645374
            prefix, _, rest = paper.doc_id.partition(":")
            return re.sub(r"[^A-Za-z0-9]", "", prefix).capitalize() + re.sub(r"[^A-Za-z0-9]", "", rest)[:10]
        else:
            stem = "Doc"
        stem = re.sub(r"[^A-Za-z]", "", stem)[:20].capitalize() or "Doc"
        return f"{stem}{paper.year or 'nd'}"

    def assign(self, paper: Paper) -> str:
        base = self.base(paper)
        key = base
        suffix = ord("b")
        while key in self.taken:
            key = f"{base}{chr(suffix)}" if suffix <= ord("z") else f"{base}_{suffix - ord('z')}"
            suffix += 1
        self.taken.add(key)
        paper.key = key
        return key
