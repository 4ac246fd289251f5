"""Turn a finished run into what a reader sees: cited text, references, BibTeX, Markdown.

Only claims that survived verification are rendered, and only keys of gathered evidence can
appear in the text: rendering drops any other key as the last guard.
"""

from __future__ import annotations

import re

from agent.core.evidence import insufficient_letter, offered_evidence, option_text
from agent.core.models import Paper
from agent.core.state import INSUFFICIENT, NO_ANSWER, Claim, Evidence, Reference, RunState, Status

__all__ = ["bibtex", "reference_entry", "references", "render_text", "status_of"]


def _authors(paper: Paper) -> str:
    if not paper.authors:
        return ""
    names = paper.authors[:3]
    more = ", et al." if len(paper.authors) > 3 else ""
    return ", ".join(names) + more


def reference_entry(paper: Paper) -> str:
    parts = [a for a in (_authors(paper), f"({paper.year})" if paper.year else "(n.d.)") if a]
    title = (paper.title or paper.source or paper.doc_id).rstrip(".")
    entry = " ".join(parts) + f". {title}."
    if paper.venue:
        entry += f" {paper.venue}."
    if paper.doi:
        entry += f" https://doi.org/{paper.doi}"
    if paper.abstract_only:
        entry += " [abstract only]"
    return entry


def bibtex(paper: Paper) -> str:
    key = re.sub(r"[^A-Za-z0-9]", "", paper.key) or "ref"
    kind = "article" if paper.venue else "misc"
    fields = {
        "title": paper.title or paper.doc_id,
        "author": " and ".join(paper.authors) if paper.authors else None,
        "year": str(paper.year) if paper.year else None,
        "journal" if kind == "article" else "howpublished": paper.venue or paper.source or None,
        "doi": paper.doi,
    }
    body = ",\n".join(f"  {k} = {{{v.replace('{', '').replace('}', '')}}}" for k, v in fields.items() if v)
    return f"@{kind}{{{key},\n{body}\n}}"


def _valid(claim: Claim, evidence: dict[str, Evidence]) -> list[str]:
    return [k for k in claim.citations if k in evidence]


def _found(state: RunState, k: int = 3, chars: int = 200) -> str:
    """What was read, best first, for an answer that has to say "insufficient evidence".

    Only the papers' own words are shown: the quote the summary step verified in the chunk,
    else the chunk's opening. A model's summary is unchecked, so it is never presented as what
    a paper says.
    """
    read = offered_evidence(state, min_score=0, k=k)  # ranked as the answer step ranks them
    if not read:
        return ""
    lines = ["Passages read (not enough to answer):"]
    for e in read:
        text = " ".join((e.quote or e.text).split())
        start = re.search(r"[.!?] (?=[A-Z])", text[:150])
        if not e.quote and text[:1].islower() and start:  # a chunk cut mid-sentence: start at the next
            text = text[start.end() :]
        if len(text) > chars:
            text = text[:chars].rsplit(" ", 1)[0] + " …"
        paper = state.papers.get(e.doc_id)
        title = f" {paper.title.rstrip('.')}." if paper is not None and paper.title else ""
        lines.append(f'- [{e.key}]{title} "{text}"')
    return "\n".join(lines)


def render_text(state: RunState) -> str:
    claims = [c for c in state.claims if _valid(c, state.evidence)]
    if state.options:
        letter = state.choice
        text = option_text(state.options, letter) or INSUFFICIENT
        cites = "".join(f" [{k}]" for c in claims for k in _valid(c, state.evidence))
        return f"{letter}) {text}{cites}" if letter else INSUFFICIENT
    if not claims:
        # The model's own summary is never checked: without a verified claim only scholarloop's
        # insufficient-evidence reason is shown (the summary may repeat a claim that failed).
        reason = state.summary if state.summary.startswith(NO_ANSWER) else f"{NO_ANSWER} the question."
        found = _found(state)
        return f"{reason}\n\n{found}" if found else reason
    sentences = []
    for claim in claims:
        body = claim.text.rstrip().rstrip(".")
        sentences.append(body + " " + "".join(f"[{k}]" for k in _valid(claim, state.evidence)) + ".")
    text = " ".join(sentences)
    if state.direct:
        keys = list(dict.fromkeys(k for c in claims for k in _valid(c, state.evidence)))
        lead = state.direct.rstrip().rstrip(".") + " " + "".join(f"[{k}]" for k in keys) + "."
        text = f"{lead}\n\n{text}"
    if state.limitations:
        text += f"\n\nLimitations: {state.limitations}"
    return text


def references(state: RunState) -> list[Reference]:
    cited_docs: list[str] = []
    for claim in state.claims:
        for key in _valid(claim, state.evidence):
            doc = state.evidence[key].doc_id
            if doc not in cited_docs:
                cited_docs.append(doc)
    out = []
    for i, doc in enumerate(cited_docs, 1):
        paper = state.papers[doc]
        out.append(
            Reference(
                number=i,
                key=paper.key,
                doc_id=doc,
                entry=reference_entry(paper),
                bibtex=bibtex(paper),
                doi=paper.doi,
            )
        )
    return out


def status_of(state: RunState) -> Status:
    if state.options:
        if state.choice and state.choice != insufficient_letter(state.options):
            return Status.answered
        return Status.insufficient_evidence
    return (
        Status.answered
        if any(_valid(c, state.evidence) for c in state.claims)
        else Status.insufficient_evidence
    )
