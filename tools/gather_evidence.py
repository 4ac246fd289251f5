"""``gather_evidence``: retrieve chunks for a question, summarise and score each, apply the gate.

Retrieval is hybrid (with MMR when configured); the retrieval score is the cheap pre-rank, so
the summary model reads only the ``evidence.summarize_k`` most promising chunks. Each summary
call returns JSON (summary, 0-10 score, verbatim quote); a malformed reply is retried once and
then scored 0 with the reason kept. Evidence is stored under a stable key (``Lo2020 pp. 3-4``)
together with the *original chunk text*, which is what citations are later checked against.
With ``evidence.min_coverage`` a free-form run reads only chunks that hold enough of the
question's rare terms (IDF-weighted, from the library's BM25 statistics): on full-text papers
that share one topic, a chunk without them is about the topic, not the answer, and when no chunk
has them the gate fails before any model call.
With ``evidence.unnamed_papers`` a free-form question that points at one unnamed work ("this
study") stops there too when the covered chunks come from that many papers: the library cannot
tell which one is meant, so the run names the candidates and asks instead of answering about
whichever ranked first.
With ``evidence.answers_threshold`` a free-form run also asks the judge whether each passage's
quote answers the question; the gate then needs one that does, so a run that found only
passages on the question's topic searches again or abstains before paying for a draft.
"""

from __future__ import annotations

import asyncio

from agent.core.deixis import unnamed_work
from agent.core.errors import ServiceError
from agent.core.evidence import quote_in
from agent.core.models import ScoredChunk
from agent.core.prompts import answers_messages, summary_messages
from agent.core.state import Evidence, GateResult, RunState
from tools.base import ToolContext, tool

__all__ = ["COVERAGE_MIN_CHUNKS", "SUMMARY_SCHEMA", "evidence_gate", "gather_evidence", "unnamed_work_gate"]

# Below this many chunks the coverage floor is not applied: document frequencies from a handful
# of chunks cannot tell a rare term from a common word the few papers happen not to use ("works"
# is unseen in a one-paper library), and reading such a library's top chunks is cheap anyway.
COVERAGE_MIN_CHUNKS = 100

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


def evidence_gate(
    state: RunState,
    *,
    min_score: int,
    min_pieces: int,
    min_papers: int,
    answers_threshold: float | None = None,
    uncovered: tuple[float, float] | None = None,
) -> GateResult:
    """Enough passages scored ``min_score``, and (``answers_threshold``) one whose quote answers.

    The answers bar applies to free-form runs only: a multiple-choice question is answered by
    judging its options, not by a passage that states the answer in its own words. ``uncovered``
    (best coverage, floor) says that the coverage floor left this round nothing to read: a failed
    gate then gives that as its reason.
    """
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
        if uncovered is not None:
            reason = (
                f"no retrieved passage holds enough of the question's terms: best coverage "
                f"{uncovered[0]:.2f} < {uncovered[1]} (evidence.min_coverage)"
            )
    if passed and answers_threshold is not None:
        best_p = max((e.p_answers or 0.0 for e in good), default=0.0)
        if best_p < answers_threshold:
            passed = False
            reason = (
                f"no passage read answers the question: the best quote scores P={best_p:.2f} "
                f"< {answers_threshold} (evidence.answers_threshold)"
            )
    return GateResult(passed=passed, pieces=len(good), papers=len(papers), reason=reason)


def unnamed_work_gate(ctx: ToolContext, covered: list[ScoredChunk]) -> GateResult | None:
    """A final failed gate when the run's question points at one unnamed work ("this study") and
    the chunks holding its terms come from ``evidence.unnamed_papers`` papers or more; else None.

    Searching again cannot mend it (new terms do not say which study is meant), so the gate is
    final and its reason names the candidates by citation key (first author and year), for the
    user to name one in the question. Keys only: the library builds them from letters and digits,
    while a title is the paper's own text, and the reason reaches the agent model unfenced.
    """
    least = ctx.settings.evidence.unnamed_papers
    phrase = None if least is None else unnamed_work(ctx.state.question)
    if least is None or phrase is None:
        return None
    papers = dict.fromkeys(h.chunk.doc_id for h in covered)
    if len(papers) < least:
        return None
    named = ", ".join(dict.fromkeys(h.chunk.key for h in covered))
    holders = "1 paper holds" if len(papers) == 1 else f"{len(papers)} papers hold"
    reason = (
        f"the question asks about {phrase!r} without naming it, and {holders} its terms ({named}). "
        f"Name the paper (title, first author or year) in place of {phrase!r} (evidence.unnamed_papers)"
    )
    return GateResult(passed=False, pieces=0, papers=len(papers), reason=reason, final=True)


def _to_read(state: RunState, question: str, hits: list[ScoredChunk], k: int) -> list[ScoredChunk]:
    """The hits to summarise: each chunk is read once per run.

    Asked again, the same question reads further down its ranking (the ``k`` best unread hits).
    A new question (a re-query's) reads what is new among its own ``k`` best, and keeps what was
    read before as it stands. Re-reading those under the re-query's wording repeated the first
    round at the full price: on covidqa-dev, 61 of 68 re-queries after a failed citation check
    re-read only chunks already read, ~30 s each time, and none of those re-reads led to a correct
    answer (``benchmarks/requery_rereads.py``; benchmarks/README.md, "Claims that describe their
    passage, and reading each passage once").
    """
    read = {e.chunk_id for e in state.evidence.values()}
    if any(e.question == question for e in state.evidence.values()):
        return [h for h in hits if h.chunk.chunk_id not in read][:k]
    return [h for h in hits[:k] if h.chunk.chunk_id not in read]


async def _p_answers(ctx: ToolContext, question: str, evidence: Evidence) -> None:
    """The judge's P(Yes) that the passage's verified quote (else its summary) answers the question.

    The summariser's 0-10 score cannot carry this: the 1.5B model gives every passage it parses
    the prompt's "5 related" anchor (benchmarks/README.md). The quote is judged, not the chunk,
    because that is the form the threshold was chosen on (a sentence, benchmarks/answer_gate.py)
    and a short prompt keeps the check at a few seconds per passage.
    """
    statement = evidence.quote or evidence.summary
    if evidence.error or not statement:
        return
    evidence.p_answers = round(await ctx.p_yes(answers_messages(question, statement)), 4)


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
    floor = 0.0 if state.options else settings.evidence.min_coverage
    uncovered: tuple[float, float] | None = None  # (best coverage, floor) when none was read
    ambiguous: GateResult | None = None
    if floor > 0 and hits and len(ctx.searcher.library.chunks) >= COVERAGE_MIN_CHUNKS:
        # measured against the run's own question: a re-query's terms are not what must be answered
        bm25 = ctx.searcher.bm25()
        coverage = [bm25.coverage(state.question, h.chunk.text) for h in hits]
        hits = [h for h, c in zip(hits, coverage, strict=True) if c >= floor]
        uncovered = None if hits else (max(coverage), floor)
        ambiguous = unnamed_work_gate(ctx, hits)
    fresh = [] if ambiguous else _to_read(state, question, hits, settings.evidence.summarize_k)
    for hit in fresh:
        if hit.chunk.doc_id not in state.papers:
            state.papers[hit.chunk.doc_id] = ctx.searcher.library.paper(hit.chunk.doc_id)
    ctx.emit("gather", question=question, chunks=len(fresh))
    results = await asyncio.gather(*(_summarise(ctx, question, h) for h in fresh))
    answers_threshold = None if state.options else settings.evidence.answers_threshold
    if answers_threshold is not None:
        # asked of the run's own question: a re-query's search terms are not what must be answered
        await asyncio.gather(*(_p_answers(ctx, state.question, e) for e in results))
    for hit, evidence in zip(fresh, results, strict=True):
        evidence.key = evidence_key(state, hit)
        previous = state.evidence.get(evidence.key)
        if previous is None or evidence.score >= previous.score:
            state.evidence[evidence.key] = evidence
    ev = settings.evidence
    state.gate = ambiguous or evidence_gate(
        state,
        min_score=ev.min_score,
        min_pieces=ev.min_pieces,
        min_papers=ev.min_papers,
        answers_threshold=answers_threshold,
        uncovered=uncovered,
    )
    ranked = sorted(results, key=lambda e: -e.score)
    lines = [
        f"Read {len(fresh)} new passage(s); evidence gate "
        f"{'PASSED' if state.gate.passed else 'FAILED'}: {state.gate.reason}."
    ]
    for e in ranked[:5]:
        lines.append(
            f"- [{e.key}] score {e.score}"
            + (f", answers P={e.p_answers:.2f}" if e.p_answers is not None else "")
            + f": {e.summary[:160]}"
            + (f" (error: {e.error})" if e.error else "")
        )
    return "\n".join(lines)
