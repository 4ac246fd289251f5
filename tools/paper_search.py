"""``paper_search``: find papers for a query and add them to the run's candidate set.

Offline it ranks the local library at paper level (hybrid BM25 + dense, each paper scored by
its best chunk). Later ``gather_evidence`` calls read chunks from the candidates only, like
PaperQA's paper collection. Online search (Semantic Scholar, Crossref) plugs in here when
enabled.
"""

from __future__ import annotations

from dataclasses import replace

from corpus.search import Filters
from tools.base import ToolContext, ToolRetry, tool

__all__ = ["candidate_filters", "paper_search"]


def candidate_filters(ctx: ToolContext) -> Filters:
    """The filters ``gather_evidence`` should use: the run's own ones, narrowed to the candidates."""
    base, candidates = ctx.base_filters, ctx.state.candidates
    return replace(base, include_doc_ids=set(candidates)) if candidates else base


@tool
async def paper_search(ctx: ToolContext, query: str, year_min: int = 0, year_max: int = 0) -> str:
    """Search for papers relevant to a query and add them to the candidates evidence is drawn from.

    Args:
        query: Search terms: key entities, methods and outcomes; not a full sentence.
        year_min: Earliest publication year to include (0 for no limit).
        year_max: Latest publication year to include (0 for no limit).
    """
    if not query.strip():
        raise ToolRetry("query is empty: give search terms")
    if ctx.searcher is None:
        return "No paper library is loaded."
    state = ctx.state
    state.queries_tried.append(query)
    base = ctx.base_filters
    filters = replace(base, year_min=year_min or base.year_min, year_max=year_max or base.year_max)
    k = ctx.settings.retrieval.paper_k
    notes: list[str] = []
    online = ctx.online
    if online is not None and not online.offline:
        outcome = await online.search(query, year_min=filters.year_min, year_max=filters.year_max)
        notes += outcome.warnings
        fresh = [h for h in outcome.hits if online.known(h) is None][: ctx.settings.online.add_k]
        added, warnings = await online.add_to_library(fresh, fetch=ctx.settings.online.fetch)
        notes += warnings
        if added:
            notes.append(f"added {len(added)} paper(s) from online search to the library")
        retracted = [h.title[:80] for h in outcome.hits if h.retracted]
        if retracted:
            notes.append(f"retracted (not used as evidence): {retracted}")
            base = replace(
                base,
                exclude_doc_ids=set(base.exclude_doc_ids)
                | {d for h in outcome.hits if h.retracted and (d := online.known(h)) is not None},
            )
            ctx.base_filters = base
            filters = replace(filters, exclude_doc_ids=base.exclude_doc_ids)
    found = ctx.searcher.search_papers(query, k, filters=filters)
    candidates = state.candidates
    new = 0
    for doc_id, score in found:
        if doc_id not in candidates:
            new += 1
        candidates[doc_id] = max(score, candidates.get(doc_id, 0.0))
        state.papers.setdefault(doc_id, ctx.searcher.library.paper(doc_id))
    ctx.filters = candidate_filters(ctx)
    ctx.emit("search", query=query, found=len(found), new=new)
    lines = [f"Found {len(found)} paper(s) ({new} new); {len(candidates)} candidate(s) in total."]
    lines += [f"Note: {n}" for n in notes]
    for doc_id, score in found[:5]:
        p = state.papers[doc_id]
        flag = " [abstract only]" if p.abstract_only else ""
        lines.append(
            f"- {p.key}: {(p.title or '(untitled)')[:100]} ({p.year or 'n.d.'}){flag} score {score:.2f}"
        )
    return "\n".join(lines)
