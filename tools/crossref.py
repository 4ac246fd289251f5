"""Crossref through ``habanero``, whose client is synchronous: every call runs off the event loop.

``CROSSREF_MAILTO`` (optional) puts requests in Crossref's polite pool. A 429's ``Retry-After``
is honoured. A retraction is flagged when Crossref's ``updated-by`` or ``update-to`` entries
say so.
"""

from __future__ import annotations

import asyncio
import os
import re
from typing import Any

import httpx

from agent.core.errors import (
    NetworkDownError,
    RateLimitError,
    ScholarloopError,
    ServiceTimeoutError,
    ServiceUnavailableError,
)
from agent.core.retry import RetryPolicy, retry_after_seconds
from tools.online import DiskCache, Hit, cached_request, normalise_doi, strip_tags

__all__ = ["CrossrefClient", "hit_from_crossref"]


def _year(item: dict[str, Any]) -> int | None:
    for field in ("issued", "published", "published-print", "published-online", "created"):
        parts = (item.get(field) or {}).get("date-parts") or [[None]]
        if parts and parts[0] and parts[0][0]:
            return int(parts[0][0])
    return None


def _retracted(item: dict[str, Any]) -> bool:
    for field in ("updated-by", "update-to"):
        for entry in item.get(field) or []:
            if "retract" in str(entry.get("type", "")).lower():
                return True
    return "retract" in str(item.get("subtype", "")).lower()


def hit_from_crossref(item: dict[str, Any]) -> Hit:
    title = " ".join(item.get("title") or []) or ""
    authors = [
        " ".join(p for p in (a.get("given"), a.get("family")) if p) or a.get("name", "")
        for a in item.get("author") or []
    ]
    pdf = next(
        (link.get("URL") for link in item.get("link") or [] if "pdf" in str(link.get("content-type", ""))),
        None,
    )
    abstract = item.get("abstract")
    return Hit(
        title=re.sub(r"\s+", " ", title).strip(),
        authors=[a for a in authors if a],
        year=_year(item),
        venue=(item.get("container-title") or [None])[0],
        doi=normalise_doi(item.get("DOI")),
        citation_count=item.get("is-referenced-by-count"),
        abstract=strip_tags(abstract) if abstract else None,
        pdf_url=pdf,
        retracted=_retracted(item),
        sources=["crossref"],
        source_ids={"crossref": item.get("DOI", "")},
    )


def _unwrap(exc: BaseException) -> BaseException:
    """habanero wraps transport errors in RuntimeError; the cause says what happened."""
    seen = exc
    while seen.__cause__ is not None or seen.__context__ is not None:
        seen = seen.__cause__ or seen.__context__  # type: ignore[assignment]
        if isinstance(seen, httpx.HTTPError):
            return seen
    return exc


def _classify(exc: BaseException) -> ScholarloopError | None:
    cause = _unwrap(exc)
    if isinstance(cause, httpx.ConnectError):
        return NetworkDownError(f"cannot reach Crossref: {cause}")
    if isinstance(cause, httpx.HTTPStatusError):
        status = cause.response.status_code
        if status == 429:
            return RateLimitError("rate limit (429)", retry_after=retry_after_seconds(cause.response.headers))
        if status >= 500:
            return ServiceUnavailableError(f"{type(cause).__name__}: {cause}")
    if type(exc).__name__ == "RequestError" and " 429" in f" {exc}":
        return RateLimitError("rate limit (429)")
    if isinstance(cause, httpx.TimeoutException):
        return ServiceTimeoutError(f"{type(cause).__name__}: {cause}")
    return None


class CrossrefClient:
    def __init__(self, *, timeout: float = 20.0, cache: DiskCache | None = None, retries: int = 3) -> None:
        from habanero import Crossref

        self._client = Crossref(mailto=os.environ.get("CROSSREF_MAILTO"), timeout=timeout)
        self.cache = cache
        self.policy = RetryPolicy(max_retries=retries)

    async def _request(self, what: str, key: str, fn: Any) -> Any:
        return await cached_request(
            self.cache,
            key,
            lambda: asyncio.to_thread(fn),
            source="Crossref",
            what=what,
            host="api.crossref.org",
            classify=_classify,
            policy=self.policy,
        )

    async def search(
        self, query: str, *, limit: int = 20, year_min: int | None = None, year_max: int | None = None
    ) -> list[Hit]:
        filters: dict[str, str] = {}
        if year_min:
            filters["from_pub_date"] = str(year_min)
        if year_max:
            filters["until_pub_date"] = str(year_max)

        def call() -> list[dict[str, Any]]:
            data = self._client.works(query=query, limit=limit, filter=filters or None)
            return list((data.get("message") or {}).get("items") or [])

        rows = await self._request("search", f"crossref:search:{query}:{filters}:{limit}", call)
        return [hit_from_crossref(r) for r in rows if r.get("title")]

    async def work_by_doi(self, doi: str) -> Hit | None:
        def call() -> dict[str, Any] | None:
            try:
                data = self._client.works(ids=doi)
            except httpx.HTTPStatusError as exc:
                if exc.response.status_code == 404:
                    return None
                raise
            return data.get("message") if isinstance(data, dict) else None

        row = await self._request("work", f"crossref:doi:{doi}", call)
        return hit_from_crossref(row) if row else None
