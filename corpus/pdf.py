"""The PDF reader: pages, text and metadata (title, authors, year, DOI) of one PDF, via pypdf.

It is kept apart from the other readers because it is the heavy, risky one. Text, HTML and
JSONL readers are linear in their input; pypdf parses whatever a file says, and a small hostile
PDF can take minutes or gigabytes. So a build runs :func:`read_pdf` in a worker process under a
time and a memory limit (:mod:`corpus.isolate`, which names it ``"corpus.pdf:read_pdf"``), and
this module imports only what that worker needs.

Bad input becomes a :class:`ReadIssue`: a fatal one naming the reason when the file cannot be
read, a non-fatal warning for an unreadable page (the document is kept). :func:`read_pdf` lets
``MemoryError`` through (every other exception becomes a reason): in a :mod:`corpus.isolate`
worker it means the worker's memory limit was hit, and the worker says so.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from agent.core.models import Document, Page, Paper, ReadIssue
from corpus.metadata import DOI, YEAR, ReadResult, content_hash, find_doi, source_name

__all__ = ["read_pdf"]

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
        if 4 <= len(words) <= 30 and not DOI.search(line) and not _HEADER.search(line):
            title = line
            for nxt in lines[i + 1 : i + 5]:
                if not nxt or _HEADER.search(nxt) or DOI.search(nxt) or len(nxt.split()) > 15:
                    break
                if not (_RUNS_ON.search(title) or nxt[0].islower()):
                    break
                title = f"{title} {nxt}"
            return title
    return None


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
    year_match = YEAR.search(str(meta.get("/CreationDate") or "")) or YEAR.search(head[:3000])
    text = "\n\n".join(p.text for p in pages)
    paper = Paper(
        doc_id="",
        title=title or None,
        authors=authors,
        year=int(year_match.group(1)) if year_match else None,
        doi=find_doi(head),
        source=src,
        content_hash=content_hash(text),
        n_pages=len(pages),
    )
    return Document(paper=paper, pages=pages, warnings=warnings)
