"""Citation keys: the short name a passage is cited by, e.g. ``Lo2020`` or ``Lo2020b``.

A key is what a model writes in its answer ("[Lo2020 p. 3]") and what the citation checker
looks up, so it must be short (a model copies it without typos, a reader takes it in at a
glance) and unique in the library (one key, one paper: ``Lo2020`` and ``Lo2020b`` never point
at the same text). Keys are allocated once, when a paper enters the library, and then stored.
"""

from __future__ import annotations

import re

from agent.core.models import Paper

__all__ = ["CitationKeys"]


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
