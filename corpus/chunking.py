"""Split a document into overlapping chunks on sentence boundaries, keeping exact provenance.

Each chunk's text is exactly ``document.text[char_start:char_end]``, so a quote can be checked
character for character and a reader can be pointed at the page range. A chunk ends at the
last sentence end that falls in the back half of the target window. Failing that, it ends at
whitespace, and only then at a hard cut, so every piece of text lands in some chunk.
"""

from __future__ import annotations

import bisect
import re

from agent.core.models import PAGE_SEPARATOR, Chunk, Document

__all__ = ["chunk_document", "page_offsets"]

_SENTENCE_END = re.compile(r"[.!?][\"')\]]*\s+|\n\s*\n")
_SPACE = re.compile(r"\s+")


def page_offsets(document: Document) -> list[int]:
    """Start offset of each page in ``document.text``."""
    starts: list[int] = []
    pos = 0
    for page in document.pages:
        starts.append(pos)
        pos += len(page.text) + len(PAGE_SEPARATOR)
    return starts


def _boundary(text: str, lo: int, hi: int) -> int | None:
    """The last sentence boundary (position after the whitespace) in ``(lo, hi]``."""
    best = None
    for match in _SENTENCE_END.finditer(text, lo, hi):
        best = match.end()
    return best


def _first_match(pattern: re.Pattern[str], text: str, lo: int, hi: int) -> int | None:
    """The end of the first ``pattern`` match ending in ``[lo, hi)``."""
    match = pattern.search(text, max(lo - 8, 0), hi)
    while match is not None and match.end() < lo:
        match = pattern.search(text, match.end(), hi)
    return match.end() if match is not None and match.end() < hi else None


def _overlap_start(text: str, floor: int, end: int, overlap: int) -> int:
    """Where the next chunk begins: a sentence start in the last ``overlap`` characters, else one up
    to twice as far back, else a word start, never before ``floor``."""
    lo = max(floor, end - overlap)
    return (
        _first_match(_SENTENCE_END, text, lo, end)
        or _first_match(_SENTENCE_END, text, max(floor, end - 2 * overlap), lo)
        or _first_match(_SPACE, text, lo, end)
        or lo
    )


def _space(text: str, lo: int, hi: int) -> int | None:
    best = None
    for match in _SPACE.finditer(text, lo, hi):
        best = match.end()
    return best


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def chunk_document(document: Document, *, chunk_chars: int = 1800, overlap_chars: int = 200) -> list[Chunk]:
    if chunk_chars <= 0:
        raise ValueError("chunk_chars must be positive")
    overlap = max(0, min(overlap_chars, chunk_chars // 2))
    text = document.text
    starts = page_offsets(document)
    paper = document.paper
    # Only paginated documents (PDFs) give page numbers; text files and JSONL records have none.
    numbers = [p.number for p in document.pages] if paper.n_pages is not None else []
    chunks: list[Chunk] = []
    start = 0
    n = len(text)
    while start < n:
        hard_end = min(n, start + chunk_chars)
        if hard_end == n:
            end = n
        else:
            end = (
                _boundary(text, start + chunk_chars // 2, hard_end)
                or _space(text, start + chunk_chars // 2, hard_end)
                or hard_end
            )
        c_start, c_end = _trim(text, start, end)
        if c_end > c_start:
            first = bisect.bisect_right(starts, c_start) - 1
            last = bisect.bisect_right(starts, c_end - 1) - 1
            chunks.append(
                Chunk(
                    chunk_id=f"{paper.doc_id}:{len(chunks)}",
                    doc_id=paper.doc_id,
                    key=paper.key,
                    text=text[c_start:c_end],
                    char_start=c_start,
                    char_end=c_end,
                    page_start=numbers[first] if numbers else None,
                    page_end=numbers[last] if numbers else None,
                )
            )
        if end >= n:
            break
        # Start the next chunk about `overlap` characters back at a sentence start, else a word
        # start: never mid-word, or the reader sees "he spread of …" and the answer model
        # copies the torn sentence into a claim.
        start = _overlap_start(text, start + 1, end, overlap) if overlap else end
    return chunks
