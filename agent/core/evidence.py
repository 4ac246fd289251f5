"""Small rules about evidence and options that every layer above the kernel shares.

They live here, below the tools, because the answer step, the citation check, the renderer,
the policy and the benchmark must agree on them exactly: which passages the answer step is
offered, when a quote counts as verbatim, how options are lettered, and which option abstains.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence

from agent.core.state import Evidence, RunState

__all__ = [
    "LETTERS",
    "insufficient_letter",
    "is_insufficient",
    "lettered",
    "letters",
    "normalise",
    "offered_evidence",
    "option_text",
    "quote_in",
]

LETTERS = string.ascii_uppercase


def letters(options: Sequence[str]) -> list[tuple[str, str]]:
    """``[("A", first option), ("B", second), …]`` in presentation order."""
    return list(zip(LETTERS, options, strict=False))


def lettered(options: Sequence[str]) -> str:
    """The options as a prompt lists them, one ``X) text`` line each."""
    return "\n".join(f"{letter}) {text}" for letter, text in letters(options))


def option_text(options: Sequence[str], letter: str | None) -> str | None:
    """The text of option ``letter``, or ``None`` for no letter or one past the options."""
    return dict(letters(options)).get(letter or "")


def is_insufficient(text: str) -> bool:
    """Is this option the abstention ("Insufficient information to answer the question")?"""
    return text.strip().lower().startswith("insufficient")


def insufficient_letter(options: Sequence[str]) -> str | None:
    for letter, text in letters(options):
        if is_insufficient(text):
            return letter
    return None


def normalise(text: str) -> str:
    return " ".join(re.sub(r"[^\w%.]+", " ", text.lower()).split())


def quote_in(quote: str, passage: str, min_chars: int = 12) -> bool:
    """Is ``quote`` (nearly) verbatim in ``passage``? Whitespace, case and punctuation are ignored.

    A quote the model shortened or retyped slightly still counts when 90% of its word 5-grams
    occur in the passage. A made-up quote does not.
    """
    q, p = normalise(quote), normalise(passage)
    if len(q) < min_chars:
        return False
    if q in p:
        return True
    words = q.split()
    if len(words) < 6:
        return False
    grams = [" ".join(words[i : i + 5]) for i in range(len(words) - 4)]
    return sum(g in p for g in grams) / len(grams) >= 0.9


def offered_evidence(state: RunState, *, min_score: int, k: int) -> list[Evidence]:
    """The ``k`` best passages: scored at least ``min_score``, then any whose summary call failed.

    A failed summary says nothing about the passage; dropping it lost a LitQA2 gold passage
    whose summary ran out of tokens. Those rank after every scored passage.
    """
    good = [e for e in state.evidence.values() if e.score >= min_score or e.error]
    return sorted(good, key=lambda e: (e.error is not None, -e.score, -e.retrieval_score))[:k]
