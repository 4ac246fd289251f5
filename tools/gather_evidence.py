"""``gather_evidence``: retrieve chunks for a question, summarise and score each, apply the gate.

Retrieval is hybrid (with MMR when configured); the retrieval score is the cheap pre-rank, so
the summary model reads only the ``evidence.summarize_k`` most promising chunks. Each summary
call returns JSON (summary, 0-10 score, verbatim quote); a malformed reply is retried once and
then scored 0 with the reason kept. Evidence is stored under a stable key (``Lo2020 pp. 3-4``)
together with the *original chunk text*, which is what citations are later checked against.
"""

from __future__ import annotations

import asyncio

from agent.core.errors import ServiceError
from agent.core.evidence import quote_in
from agent.core.models import ScoredChunk
from agent.core.prompts import summary_messages
from agent.core.state import Evidence, GateResult, RunState
from tools.base import ToolContext, tool

__all__ = ["SUMMARY_SCHEMA", "evidence_gate", "gather_evidence"]

SUMMARY_SCHEMA = {
    "type": "object",
    "properties": {
        # length caps keep a small model from running out of tokens mid-JSON (seen on LitQA2)
        "summary": {"type": "string", "maxLength": 240},
        "score": {"type": "integer", "minimum": 0, "maximum": 10},
        "quote": {"type": "string", "maxLength": 300},
    },
    "required": ["summary", "score", "quote"],
}


def evidence_key(state: RunState, hit: ScoredChunk) -> str:
    chunk = hit.chunk
    base = chunk.citation or chunk.chunk_id
    key = base
    n = 2
    while key in state.evidence and state.evidence[key].chunk_id != chunk.chunk_id:
        key = f"{base} #{n}"
        n += 1
    return key


def evidence_gate(state: RunState, *, min_score: int, min_pieces: int, min_papers: int) -> GateResult:
    good = [e for e in state.evidence.values() if e.score >= min_score]
    papers = {e.doc_id for e in good}
    passed = len(good) >= min_pieces and len(papers) >= min_papers
    if passed:
        reason = f"{len(good)} piece(s) scored ≥ {min_score} from {len(papers)} paper(s)"
    else:
        best = max((e.score for e in state.evidence.values()), default=0)
        reason = (
            f"need {min_pieces} piece(s) scored ≥ {min_score} from {min_papers} paper(s); have {len(good)} "
            f"from {len(papers)} (best score {best})"
        )
    return GateResult(passed=passed, pieces=len(good), papers=len(papers), reason=reason)


async def _summarise(ctx: ToolContext, question: str, hit: ScoredChunk) -> Evidence:
    chunk = hit.chunk
    paper = ctx.state.papers.get(chunk.doc_id)
    evidence = Evidence(
        key="",
        chunk_id=chunk.chunk_id,
        doc_id=chunk.doc_id,
        paper_key=chunk.key,
        page_start=chunk.page_start,
        page_end=chunk.page_end,
        text=chunk.text,
        retrieval_score=hit.score,
        question=question,
    )
    llm = ctx.llm("summary")
    messages = summary_messages(question, chunk.citation, paper.title if paper else None, chunk.text)
    last_error = ""
    for _attempt in range(2):
        try:
            completion = await llm.complete(
                messages,
                role="summary",
                json_schema=SUMMARY_SCHEMA,
                # the schema caps the reply near 540 characters; numbers and symbols tokenise at
                # ~1.5 characters per token, and 200 tokens cut a LitQA2 quote off mid-string
                max_tokens=min(400, ctx.settings.llm.max_tokens),
            )
            ctx.state.add_usage(completion.usage)
            data = completion.json()
            score = int(data.get("score", 0))
            evidence.score = max(0, min(10, score))
            evidence.summary = str(data.get("summary", "")).strip()
            quote = str(data.get("quote", "")).strip()
            evidence.quote = quote if quote_in(quote, chunk.text) else ""
            return evidence
        except (ServiceError, ValueError, TypeError, AttributeError) as exc:
            last_error = f"{type(exc).__name__}: {exc}"
    evidence.score = 0
    evidence.error = f"summary failed twice: {last_error}"[:300]
    return evidence


@tool
async def gather_evidence(ctx: ToolContext, question: str) -> str:
    """Find passages in the paper index that bear on a question, score them 0-10, and keep the best.

    Args:
        question: The question or sub-question to gather evidence for, in plain words.
    """
    if ctx.searcher is None:
        return "No paper index is loaded: search for papers first."
    settings = ctx.settings
    hits = ctx.searcher.search(
        question,
        k=settings.retrieval.top_k,
        filters=ctx.filters,
        mmr_lambda=settings.retrieval.mmr_lambda,
    )
    state = ctx.state
    # A chunk is read again only for a new question: a re-query may find it relevant after all.
    known = {e.chunk_id for e in state.evidence.values() if e.question == question}
    fresh = [h for h in hits if h.chunk.chunk_id not in known][: settings.evidence.summarize_k]
    for hit in fresh:
        if hit.chunk.doc_id not in state.papers:
            state.papers[hit.chunk.doc_id] = ctx.searcher.library.paper(hit.chunk.doc_id)
    ctx.emit("gather", question=question, chunks=len(fresh))
    results = await asyncio.gather(*(_summarise(ctx, question, h) for h in fresh))
    for hit, evidence in zip(fresh, results, strict=True):
        evidence.key = evidence_key(state, hit)
        previous = state.evidence.get(evidence.key)
        if previous is None or evidence.score >= previous.score:
            state.evidence[evidence.key] = evidence
    ev = settings.evidence
    state.gate = evidence_gate(
        state, min_score=ev.min_score, min_pieces=ev.min_pieces, min_papers=ev.min_papers
    )
    ranked = sorted(results, key=lambda e: -e.score)
    lines = [
        f"Read {len(fresh)} new passage(s); evidence gate "
        f"{'PASSED' if state.gate.passed else 'FAILED'}: {state.gate.reason}."
    ]
    for e in ranked[:5]:
        lines.append(
            f"- [{e.key}] score {e.score}: {e.summary[:160]}" + (f" (error: {e.error})" if e.error else "")
        )
    return "\n".join(lines)
