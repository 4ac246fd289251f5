"""What every reader fills in the same way: a paper's DOI, year, content hash and source name.

Shared by :mod:`corpus.readers` and :mod:`corpus.pdf`; it imports neither, so the PDF reader
loads without the other readers (a :mod:`corpus.isolate` worker imports only what it runs).
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from agent.core.models import Document, ReadIssue

__all__ = ["DOI", "YEAR", "ReadResult", "content_hash", "find_doi", "source_name"]

DOI = re.compile(r"\b(10\.\d{4,9}/[^\s\"<>]+)", re.IGNORECASE)
YEAR = re.compile(r"\b(19[5-9]\d|20[0-4]\d)\b")

ReadResult = Document | ReadIssue


def find_doi(text: str, *, unique: bool = False) -> str | None:
    """First DOI in ``text``, lower-cased, without trailing punctuation.

    ``unique=True`` returns None when several different DOIs appear (a reference list or a
    notes file, not one paper's own DOI).
    """
    found = [m.group(1).rstrip(".,;)]").lower() for m in DOI.finditer(text)]
    if not found or (unique and len(set(found)) > 1):
        return None
    return found[0]


def content_hash(text: str) -> str:
    """sha256 of the extracted text: duplicates are found by it, and files get their doc_id from it."""
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
