"""Atomic claims: split a drafted claim that states several facts, and merge repeated ones.

The citation check judges a claim as a whole: "X rose by 40%; Y acts through MAPK" fails
if the passage supports only the first half, and the supported half is lost with it. Split
into one fact per claim (the decomposition step of FActScore), each fact is judged on its own,
the supported ones stay and only the unsupported ones are dropped or sent back to search.

``rules`` cuts only where the text itself marks a new statement: a sentence end, a
semicolon, or a contrast (", whereas", ", while", ", but") between two parts that each carry a
verb. It never cuts a list ("IL-25, IL-33, and TSLP are …"), because a list item is not a
statement. ``model`` additionally asks the answer model to rewrite a long claim that the rules
leave whole as standalone facts (:func:`agent.core.prompts.decompose_messages`); anything it
returns is still only a candidate, judged against the cited passage like every claim.
"""

from __future__ import annotations

import re

from agent.core.evidence import normalise
from agent.core.prompts import sentences
from agent.core.state import Claim

__all__ = [
    "atomic_parts",
    "best_quote",
    "content_words",
    "dedupe",
    "drop_repeats",
    "is_fragment",
    "looks_compound",
    "mend_fragments",
    "split_claim",
    "tidy",
]

# A contrast joins two statements; "and" mostly joins list items, so it is left to the model.
_CONTRAST = re.compile(r",\s+(?:whereas|while|but|although|though)\s+", re.IGNORECASE)
_VERB_HINT = re.compile(
    r"\b(?:is|are|was|were|be|been|being|has|have|had|can|could|may|might|must|shall|should|will|"
    r"would|does|do|did|shows?|showed|shown|\w{3,}ed|\w{3,}es)\b",
    re.IGNORECASE,
)
_STOP = frozenset(
    {
        "the",
        "and",
        "for",
        "with",
        "that",
        "this",
        "from",
        "were",
        "was",
        "are",
        "has",
        "have",
        "had",
        "its",
        "their",
        "they",
        "which",
        "into",
        "than",
        "also",
        "been",
        "not",
        "but",
        "can",
        "may",
        "such",
        "these",
        "those",
        "there",
        "then",
        "when",
        "where",
        "while",
    }
)


def content_words(text: str) -> set[str]:
    return {w for w in normalise(text).split() if len(w) > 2 and w not in _STOP}


def _statement(text: str) -> bool:
    """Does ``text`` stand as a statement of its own (enough words, something verb-like)?"""
    return len(content_words(text)) >= 3 and bool(_VERB_HINT.search(text))


def _words_enough(text: str) -> bool:
    return len(content_words(text)) >= 3


def atomic_parts(text: str) -> list[str]:
    """``text`` cut at sentence ends, semicolons and contrasts; a cut whose part is no statement is undone."""
    pieces: list[tuple[str, str]] = []  # (separator before the piece, piece)
    for i, sentence in enumerate(sentences(text)):
        for j, clause in enumerate(sentence.split(";")):
            sep = ". " if i and not j else "; " if j else ""
            cuts = _CONTRAST.split(clause)
            joins = _CONTRAST.findall(clause)
            pieces.append((sep, cuts[0]))
            pieces.extend(zip(joins, cuts[1:], strict=True))
    parts: list[str] = []
    for sep, raw in pieces:
        piece = raw.strip().rstrip(".").strip()
        if not piece:
            continue
        # the writer marked a sentence end or a semicolon; a contrast word may join a mere phrase
        stands = _statement if sep not in {"", ". ", "; "} else _words_enough
        if parts and (not stands(piece) or not stands(parts[-1])):
            parts[-1] = f"{parts[-1]}{sep or ' '}{piece}"
        else:
            parts.append(piece)
    return [p[0].upper() + p[1:] for p in parts] or [text.strip()]


def looks_compound(text: str, min_words: int = 18) -> bool:
    """A long claim joining clauses with "and" or a relative clause: worth asking the model to split."""
    return len(text.split()) >= min_words and bool(re.search(r"\b(?:and|which|as well as)\b", text))


def best_quote(part: str, quote: str) -> str:
    """The sentence of ``quote`` that ``part`` rests on, when the quote holds several."""
    candidates = [s.strip() for s in sentences(quote) if s.strip()]
    if len(candidates) < 2:
        return quote
    words = content_words(part)
    if not words:
        return quote
    scored = max(candidates, key=lambda s: len(words & content_words(s)))
    return scored if len(words & content_words(scored)) / len(words) >= 0.5 else quote


def split_claim(claim: Claim, parts: list[str]) -> list[Claim]:
    """One claim per part, each keeping the claim's citations and the quote sentence it rests on."""
    if len(parts) < 2:
        return [claim]
    return [
        Claim(text=part, citations=list(claim.citations), quote=best_quote(part, claim.quote))
        for part in parts
    ]


def dedupe(claims: list[Claim]) -> list[Claim]:
    """Claims stating the same words once, with the union of their citations (first one's quote)."""
    seen: dict[str, Claim] = {}
    for claim in claims:
        key = normalise(claim.text).rstrip(".")
        if key in seen:
            kept = seen[key]
            kept.citations = list(dict.fromkeys([*kept.citations, *claim.citations]))
            kept.quote = kept.quote or claim.quote
        else:
            seen[key] = claim.model_copy(deep=True)
    return list(seen.values())


def _tokens(text: str) -> set[str]:
    """Every word and number of ``text`` but the stop words. Numbers stay whole, so "3.7 days"
    is not found in "5.8 days (4.3-7.5)", and "IL-4" differs from "IL-25"."""
    return set(re.findall(r"\d+(?:\.\d+)?|\w+", text.lower())) - _STOP


def drop_repeats(claims: list[Claim]) -> list[Claim]:
    """Verified claims less those another kept claim already says, word for word.

    A small model restates one passage sentence two or three times, once cut short and once in
    full, and each copy passes the check since each is in the passage. A claim whose every word
    and number is in a longer kept claim adds nothing; between two with the same words the
    first is kept. No threshold: a claim that differs by one word or number stays.
    """
    words = [_tokens(c.text) for c in claims]
    dropped: set[int] = set()
    for i, mine in enumerate(words):
        for j, other in enumerate(words):
            if i != j and j not in dropped and mine and mine <= other and (len(other) > len(mine) or j < i):
                dropped.add(i)
                break
    return [c for i, c in enumerate(claims) if i not in dropped]


# Words a finished statement does not end on, and lower-case words that only continue one.
_DANGLING = re.compile(
    r"\b(?:to|of|and|or|the|a|an|as|with|by|for|in|on|at|from|that|which|than|such|its|their)\W*$",
    re.IGNORECASE,
)
_CONTINUES = re.compile(r"^(?:the|a|an|and|or|but|of|to|as|with|by|for|in|on|which|that|than)\b")
# A paper's own reference in a copied sentence, "(Lin et al., 2011)": the claim cites the passage.
_INLINE_REF = re.compile(r"\s*\((?:[A-Z][^()]{0,80}?,?\s(?:19|20)\d\d[a-z]?(?:[;,][^()]{0,80})?)\)")


def is_fragment(text: str) -> bool:
    """A piece of a sentence, not a statement: it ends on "to"/"of"/"the" or starts mid-sentence."""
    t = text.strip()
    return not t or bool(_DANGLING.search(t)) or bool(_CONTINUES.match(t)) or len(content_words(t)) < 2


def tidy(text: str) -> str:
    """The claim without the paper's inline references and the space a copy leaves before a stop."""
    text = _INLINE_REF.sub("", text)
    return re.sub(r"\s+([.,;:])", r"\1", text).strip()


def mend_fragments(claims: list[Claim]) -> tuple[list[Claim], int]:
    """Rejoin a sentence the model cut across two claims; drop a fragment that has no partner.

    The local model sometimes ends one claim mid-sentence ("… as well as its potential to") and
    starts the next with the rest ("the spread of resistance genes"). The judge happily accepts
    either half against the passage, so they would reach the reader as two verified non-sentences.
    Returns the claims and how many fragments were dropped.
    """
    out: list[Claim] = []
    dropped = 0
    for claim in claims:
        text = tidy(claim.text)
        claim = claim.model_copy(update={"text": text})
        prev = out[-1] if out else None
        ended = prev is not None and prev.text.rstrip().endswith((".", "!", "?"))
        if prev is not None and (_DANGLING.search(prev.text) or (_CONTINUES.match(text) and not ended)):
            joined = f"{prev.text.rstrip('. ')} {text}"
            quote = prev.quote if prev.quote == claim.quote else f"{prev.quote} {claim.quote}".strip()
            cites = list(dict.fromkeys([*prev.citations, *claim.citations]))
            out[-1] = prev.model_copy(update={"text": joined, "citations": cites, "quote": quote})
            continue
        out.append(claim)
    kept = [c for c in out if not is_fragment(c.text)]
    dropped += len(out) - len(kept)
    return kept, dropped
