"""Questions that point at one work without naming it: "What method is developed in this study?".

A reader holding one paper asks such a question naturally, and a library of one paper answers
it. A library of many cannot: "this study" is whichever paper retrieval happens to rank first,
and on full-text papers that share a topic that is usually another study than the one meant
(on covidqa-dev the answering passage is among the two chunks read for 24% of these questions,
against 70% of the others; benchmarks/README.md, "Questions about 'this study'"). A run that can
see the reference is ambiguous should say so and ask for the paper, not answer about another one.

The patterns are deliberately narrow: a determiner ("this", "these", "the") before a noun for a
work or its authors. "The study of B-cell repertoires" and "studies on NP" name a field of
research, not one work, and do not match.
"""

from __future__ import annotations

import re

__all__ = ["unnamed_work"]

# Nouns for one piece of work, or the people who wrote it.
_WORK = (
    "study|studies|paper|article|publication|review|report|survey|trial|investigation|manuscript|"
    "preprint|commentary|editorial|chapter|analysis|analyses|model|method|approach|experiment|experiments"
)
_PEOPLE = "authors?|researchers?|investigators?"
_UNNAMED = re.compile(
    rf"\b(?:this|these|the)\s+(?:{_WORK})\b(?!\s+(?:of|on)\b)"  # "the study of X" is a field
    rf"|\bthe\s+(?:{_PEOPLE})\b",
    re.IGNORECASE,
)


def unnamed_work(question: str) -> str | None:
    """The phrase by which ``question`` points at one unnamed work ("this study", "the
    authors"), or None when it does not.

    Only the reference is detected here; whether the library can tell which work is meant is
    the caller's call (one paper, or one paper holding the question's other terms, can).
    """
    match = _UNNAMED.search(" ".join(question.split()))
    return match.group(0).lower() if match else None
