"""Readers: PDF, plain text, Markdown, HTML and JSONL corpora into :class:`Document`.

Bad input never stops a build. An unreadable file becomes a fatal :class:`ReadIssue` naming the
file and the reason. An unreadable page becomes a non-fatal warning and its document is kept.
A bad JSONL line is reported with its line number, and the reader goes on to the next line.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import re
from collections.abc import Iterator
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
]

MAX_FILE_BYTES = 200 * 1024 * 1024
SUPPORTED_SUFFIXES = {".pdf", ".txt", ".md", ".html", ".htm", ".jsonl", ".jsonl.gz"}
_DOI = re.compile(r"\b(10\.\d{4,9}/[^\s\"<>]+)", re.IGNORECASE)
_YEAR = re.compile(r"\b(19[5-9]\d|20[0-4]\d)\b")

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


def _suffix(path: Path) -> str:
    name = path.name.lower()
    return ".jsonl.gz" if name.endswith(".jsonl.gz") else path.suffix.lower()


def _read_pdf(path: Path) -> ReadResult:
    import pypdf
    import pypdf.errors

    src = str(path)
    try:
        reader = pypdf.PdfReader(path)
        if reader.is_encrypted and not reader.decrypt(""):
            return ReadIssue(source=src, reason="encrypted PDF (needs a password)")
        raw_pages = list(reader.pages)
    except pypdf.errors.FileNotDecryptedError:
        return ReadIssue(source=src, reason="encrypted PDF (needs a password)")
    except (pypdf.errors.PdfReadError, pypdf.errors.PdfStreamError, ValueError, KeyError, OSError) as exc:
        return ReadIssue(source=src, reason=f"corrupt PDF: {type(exc).__name__}: {exc}")
    except Exception as exc:  # pypdf raises many types on broken files; one bad file must not stop a build
        return ReadIssue(source=src, reason=f"unreadable PDF: {type(exc).__name__}: {exc}")
    pages: list[Page] = []
    warnings: list[ReadIssue] = []
    for number, page in enumerate(raw_pages, 1):
        try:
            text = page.extract_text() or ""
        except Exception as exc:  # one unreadable page never drops the document
            warnings.append(
                ReadIssue(source=f"{src} page {number}", reason=f"{type(exc).__name__}: {exc}", fatal=False)
            )
            text = ""
        pages.append(Page(number=number, text=text.replace("\x00", "").strip()))
    if not any(p.text for p in pages):
        return ReadIssue(
            source=src, reason="no extractable text (image-only or empty PDF; OCR is not supported)"
        )
    meta: dict[str, Any] = {}
    try:
        meta = dict(reader.metadata or {})
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
    src = str(path)
    warnings: list[ReadIssue] = []
    text = _decode(path.read_bytes(), src, warnings)
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
    src = str(path)
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
        source=str(row.get("source") or path.name),
        content_hash=_hash(text),
        abstract_only=bool(row.get("abstract_only", False)),
        n_pages=None,
    )
    return Document(paper=paper, pages=[Page(number=1, text=text)])


def read_path(path: Path, *, max_bytes: int = MAX_FILE_BYTES) -> Iterator[ReadResult]:
    """Read one file (a JSONL corpus yields many documents). Never raises for bad input."""
    src = str(path)
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
        yield from _read_jsonl(path)
        return
    try:
        result = _read_pdf(path) if suffix == ".pdf" else _read_text(path, html=suffix in {".html", ".htm"})
    except OSError as exc:
        result = ReadIssue(source=src, reason=f"cannot read: {exc}")
    if isinstance(result, Document):
        result.paper.doc_id = result.paper.content_hash[:16]
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
