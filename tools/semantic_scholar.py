"""Semantic Scholar through the ``semanticscholar`` package's async client.

The package's own retry (tenacity, up to 10 tries on 429) is switched off so that one bounded
engine (:mod:`agent.core.retry`) governs every source. Its client raises
``ConnectionRefusedError`` on 429 and does not expose the response headers, so 429s here back
off exponentially; Crossref honours ``Retry-After``. An optional ``S2_API_KEY`` comes from the
environment and is never logged.
"""

from __future__ import annotations

import os
from typing import Any

import httpx

from agent.core.errors import (
    NetworkDownError,
    RateLimitError,
    ScholarloopError,
    ServiceTimeoutError,
    ServiceUnavailableError,
)
from agent.core.retry import RetryPolicy
from tools.online import DiskCache, Hit, cached_request, normalise_doi

__all__ = ["FIELDS", "SemanticScholarClient", "hit_from_s2"]

FIELDS = [
    "title",
    "authors",
    "year",
    "venue",
    "externalIds",
    "citationCount",
    "abstract",
    "openAccessPdf",
    "isOpenAccess",
    "publicationTypes",
    "journal",
]


def hit_from_s2(data: dict[str, Any]) -> Hit:
    ids = data.get("externalIds") or {}
    pdf = data.get("openAccessPdf") or {}
    journal = data.get("journal") or {}
    return Hit(
        title=(data.get("title") or "").strip(),
        authors=[a.get("name", "") for a in data.get("authors") or [] if a.get("name")],
        year=data.get("year"),
        venue=data.get("venue") or journal.get("name") or None,
        doi=normalise_doi(ids.get("DOI")),
        citation_count=data.get("citationCount"),
        abstract=data.get("abstract"),
        pdf_url=pdf.get("url") or None,
        sources=["semantic_scholar"],
        source_ids={"semantic_scholar": data.get("paperId", "")},
    )


def _unwrap(exc: BaseException) -> BaseException:
    """The package wraps its last failure in tenacity's RetryError even with retries off."""
    last = getattr(exc, "last_attempt", None)
    inner = last.exception() if last is not None else None
    return inner if isinstance(inner, BaseException) else exc


def _network_down(exc: BaseException) -> bool:
    return isinstance(
        exc, httpx.ConnectError | httpx.UnsupportedProtocol
    ) or "Name or service not known" in str(exc)


# the package's exceptions for 500 and 504 (matched by name: it may rename its module)
_SERVER_ERRORS = {"InternalServerErrorException", "GatewayTimeoutException"}


def _classify(raised: BaseException) -> ScholarloopError | None:
    exc = _unwrap(raised)
    if isinstance(exc, ConnectionRefusedError):  # the package's 429
        return RateLimitError("rate limit (429)")
    if _network_down(exc):
        return NetworkDownError(f"cannot reach Semantic Scholar: {exc}")
    if isinstance(exc, httpx.TimeoutException):
        return ServiceTimeoutError(f"{type(exc).__name__}: {exc}")
    if isinstance(exc, httpx.RemoteProtocolError) or type(exc).__name__ in _SERVER_ERRORS:
        return ServiceUnavailableError(f"{type(exc).__name__}: {exc}")
    return None


class SemanticScholarClient:
    def __init__(self, *, timeout: float = 20.0, cache: DiskCache | None = None, retries: int = 3) -> None:
        from semanticscholar import AsyncSemanticScholar

        self._client = AsyncSemanticScholar(
            timeout=int(timeout), api_key=os.environ.get("S2_API_KEY"), retry=False
        )
        self.cache = cache
        self.policy = RetryPolicy(max_retries=retries)

    async def _request(self, what: str, key: str, call: Any) -> Any:
        return await cached_request(
            self.cache,
            key,
            call,
            source="Semantic Scholar",
            what=what,
            host="api.semanticscholar.org",
            classify=_classify,
            policy=self.policy,
        )

    async def search(
        self,
        query: str,
        *,
        limit: int = 20,
        year_min: int | None = None,
        year_max: int | None = None,
        bulk: bool = False,
    ) -> list[Hit]:
        """Relevance search, or ``bulk=True`` for the bulk endpoint (unranked, up to 1,000 a page)."""
        year = None
        if year_min or year_max:
            year = f"{year_min or ''}-{year_max or ''}"

        async def call() -> list[dict[str, Any]]:
            results = await self._client.search_paper(
                query, year=year, fields=FIELDS, limit=min(limit, 100), bulk=bulk
            )
            return [p.raw_data for p in results.items[:limit]]

        rows = await self._request("search", f"s2:search:{query}:{year}:{limit}:{bulk}", call)
        return [hit_from_s2(r) for r in rows if r.get("title")]

    async def papers(self, ids: list[str]) -> list[Hit | None]:
        """Batch lookup (S2 ids, ``DOI:…``, ``CorpusId:…``); None where an id was not found."""

        async def call() -> list[dict[str, Any] | None]:
            found, missing = await self._client.get_papers(ids[:500], fields=FIELDS, return_not_found=True)
            by_id: dict[str, dict[str, Any]] = {}
            for paper in found:
                raw = paper.raw_data
                for key in [raw.get("paperId"), *(raw.get("externalIds") or {}).values()]:
                    if key is not None:
                        by_id[str(key).lower()] = raw
            out: list[dict[str, Any] | None] = []
            for i in ids:
                plain = i.split(":", 1)[1] if ":" in i and not i.lower().startswith("10.") else i
                out.append(None if i in missing else by_id.get(plain.lower()))
            return out

        rows = await self._request("batch", f"s2:batch:{','.join(ids)}", call)
        return [hit_from_s2(r) if r else None for r in rows]

    async def paper_by_doi(self, doi: str) -> Hit | None:
        async def call() -> dict[str, Any] | None:
            from semanticscholar.SemanticScholarException import ObjectNotFoundException

            try:
                paper = await self._client.get_paper(f"DOI:{doi}", fields=FIELDS)
            except ObjectNotFoundException:
                return None
            return paper.raw_data

        row = await self._request("paper", f"s2:doi:{doi}", call)
        return hit_from_s2(row) if row else None
