"""What the library holds: papers, their pages, and chunks that know where they came from.

A chunk's ``char_start``/``char_end`` index the paper's full text (pages joined by
``PAGE_SEPARATOR``), and ``page_start``/``page_end`` are 1-based page numbers, so a citation
can send a reader to "Lo2020 pp. 3–4" and to the exact characters it quotes. A document without
pages (``Paper.n_pages`` None: text files, JSONL records) gives chunks without a page range,
cited by key alone ("Lo2020").
"""

from __future__ import annotations

from pydantic import BaseModel, Field

__all__ = ["PAGE_SEPARATOR", "Chunk", "Document", "Page", "Paper", "ReadIssue", "ScoredChunk"]

PAGE_SEPARATOR = "\n\n"


class Paper(BaseModel):
    doc_id: str = Field(description="Stable id: the corpus doc_id, or a content hash for files.")
    key: str = Field(default="", description="Short citation key unique in the library, e.g. Lo2020.")
    title: str | None = None
    authors: list[str] = Field(default_factory=list)
    year: int | None = None
    doi: str | None = None
    venue: str | None = None
    source: str = Field(default="", description="Where it was read from: a file path or corpus name.")
    content_hash: str = Field(default="", description="sha256 of the extracted text (dedupe).")
    abstract_only: bool = Field(default=False, description="Only an abstract is held, not full text.")
    n_pages: int | None = Field(
        default=None,
        description="Pages of a PDF. None for a document without pages (text, Markdown, HTML, a JSONL "
        "record): it is held as one Page, but its chunks get no page range and cite by key alone.",
    )


class Page(BaseModel):
    number: int = Field(ge=1, description="1-based page number; a document without pages is held as page 1.")
    text: str


class ReadIssue(BaseModel):
    """A problem reading one file, page or line, reported without stopping the build."""

    source: str
    reason: str
    fatal: bool = Field(default=True, description="True when the document was skipped.")


class Document(BaseModel):
    paper: Paper
    pages: list[Page]
    warnings: list[ReadIssue] = Field(default_factory=list)

    @property
    def text(self) -> str:
        return PAGE_SEPARATOR.join(p.text for p in self.pages)


class Chunk(BaseModel):
    chunk_id: str
    doc_id: str
    key: str = ""
    text: str
    char_start: int = Field(ge=0)
    char_end: int = Field(ge=0)
    page_start: int | None = None
    page_end: int | None = None

    @property
    def citation(self) -> str:
        """``Lo2020 p. 3`` / ``Lo2020 pp. 3-4`` / ``Lo2020`` (no pages known)."""
        if self.page_start is None:
            return self.key
        if self.page_end is None or self.page_end == self.page_start:
            return f"{self.key} p. {self.page_start}"
        return f"{self.key} pp. {self.page_start}-{self.page_end}"


class ScoredChunk(BaseModel):
    chunk: Chunk
    score: float
    rank: int = 0
