"""What the online clients share: the hit model, DOI normalisation, merging, the on-disk HTTP
cache, per-host limits, and one request path through the shared retry engine.

Each client only *classifies* its library's exceptions into the error tree (429, timeout, 5xx,
network down); :func:`cached_request` and :mod:`agent.core.retry` decide what happens next.
When the network is down (DNS or connect failure), :class:`~agent.core.errors.NetworkDownError`
is raised at once, with no retries. ``paper_search`` then warns once and answers from the local
library. The user sees that in seconds, not after a minute of backoff.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, Field

from agent.core.errors import OnlineError, ScholarloopError
from agent.core.retry import RetryPolicy, retry

__all__ = [
    "Classifier",
    "DiskCache",
    "Hit",
    "cached_request",
    "hit_doc_id",
    "host_limit",
    "in_years",
    "merge_hits",
    "normalise_doi",
    "normalise_title",
    "strip_tags",
]

T = TypeVar("T")
# Turns a client library's exception into the error tree (NetworkDownError, RateLimitError,
# ServiceTimeoutError, ServiceUnavailableError), or None to leave it as it is (not retried).
Classifier = Callable[[BaseException], ScholarloopError | None]


class Hit(BaseModel):
    """One paper found online (or in the local library), ready to be merged and ranked."""

    title: str
    authors: list[str] = Field(default_factory=list)
    year: int | None = None
    venue: str | None = None
    doi: str | None = None
    citation_count: int | None = None
    abstract: str | None = None
    pdf_url: str | None = None
    retracted: bool = False
    sources: list[str] = Field(default_factory=list, description="semantic_scholar, crossref, local")
    source_ids: dict[str, str] = Field(default_factory=dict)
    rank_score: float = 0.0


def normalise_doi(doi: str | None) -> str | None:
    if not doi:
        return None
    doi = doi.strip().lower()
    doi = re.sub(r"^(https?://(dx\.)?doi\.org/|doi:)", "", doi)
    return doi or None


def strip_tags(markup: str) -> str:
    """Plain text from JATS/HTML abstracts (Crossref sends ``<jats:p>``)."""
    return " ".join(re.sub(r"<[^>]+>", " ", markup).split())


def normalise_title(title: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", title.lower()))


def hit_doc_id(hit: Hit) -> str:
    """Library id of an online hit. Without a DOI it must still be stable across searches:
    the normalised title and year (what merge_hits keys on), so a re-found paper dedupes."""
    if hit.doi:
        return f"doi:{hit.doi}"
    slug = "-".join(normalise_title(hit.title).split()[:12]) or "untitled"
    return f"online:{slug}:{hit.year or ''}"


def _key(hit: Hit) -> str:
    doi = normalise_doi(hit.doi)
    return f"doi:{doi}" if doi else f"title:{normalise_title(hit.title)}:{hit.year or ''}"


def merge_hits(groups: Iterable[list[Hit]]) -> list[Hit]:
    """De-duplicate by normalised DOI (fallback: title + year), union the facts, rank.

    Rank: found by more sources first, then by position in each source's own ranking (a
    reciprocal-rank sum), then citations.
    """
    merged: dict[str, Hit] = {}
    for group in groups:
        for position, hit in enumerate(group):
            key = _key(hit)
            rr = 1.0 / (10 + position)
            if key not in merged:
                merged[key] = hit.model_copy(update={"doi": normalise_doi(hit.doi), "rank_score": rr})
                continue
            m = merged[key]
            m.rank_score += rr
            m.sources = list(dict.fromkeys(m.sources + hit.sources))
            m.source_ids.update(hit.source_ids)
            m.retracted = m.retracted or hit.retracted
            for field in ("abstract", "pdf_url", "venue", "year"):
                if getattr(m, field) in (None, "") and getattr(hit, field):
                    setattr(m, field, getattr(hit, field))
            if not m.authors and hit.authors:
                m.authors = hit.authors
            if hit.citation_count is not None:
                m.citation_count = max(m.citation_count or 0, hit.citation_count)
    return sorted(merged.values(), key=lambda h: (-len(h.sources), -h.rank_score, -(h.citation_count or 0)))


def in_years(hit: Hit, year_min: int | None, year_max: int | None) -> bool:
    if year_min is None and year_max is None:
        return True
    if hit.year is None:
        return False
    return (year_min is None or hit.year >= year_min) and (year_max is None or hit.year <= year_max)


class DiskCache:
    """JSON responses on disk, keyed by request, with a time-to-live. Writes are atomic."""

    def __init__(self, root: Path, ttl_s: float) -> None:
        self.root = root
        self.ttl_s = ttl_s

    def _path(self, key: str) -> Path:
        return self.root / f"{hashlib.sha256(key.encode()).hexdigest()}.json"

    def get(self, key: str) -> Any | None:
        if self.ttl_s <= 0:
            return None
        path = self._path(key)
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        if time.time() - record.get("stored", 0) > self.ttl_s:
            return None
        return record.get("value")

    def set(self, key: str, value: Any) -> None:
        if self.ttl_s <= 0:
            return
        self.root.mkdir(parents=True, exist_ok=True)
        path = self._path(key)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"stored": time.time(), "key": key, "value": value}))
        os.replace(tmp, path)


_HOST_LIMITS: dict[tuple[str, int], asyncio.Semaphore] = {}
_HOST_LOCK = threading.Lock()


def host_limit(host: str, limit: int = 2) -> asyncio.Semaphore:
    """One semaphore per host per event loop: a polite ceiling on concurrent requests."""
    key = (host, id(asyncio.get_running_loop()))
    with _HOST_LOCK:
        if key not in _HOST_LIMITS:
            _HOST_LIMITS[key] = asyncio.Semaphore(limit)
        return _HOST_LIMITS[key]


async def cached_request(
    cache: DiskCache | None,
    key: str,
    call: Callable[[], Awaitable[T]],
    *,
    source: str,
    what: str,
    host: str,
    classify: Classifier,
    policy: RetryPolicy,
) -> T:
    """One request to an online source: the cache, the host limit, bounded retries, clear errors.

    ``classify`` maps the client's exceptions into the error tree, so the retry engine sees which
    are transient. A :class:`NetworkDownError` (or any other :class:`OnlineError`) is raised as
    it is; anything else left after the retries becomes an :class:`OnlineError` naming the source.
    """
    if cache is not None and (cached := cache.get(key)) is not None:
        return cached

    async def once() -> T:
        async with host_limit(host):
            try:
                return await call()
            except Exception as exc:
                mapped = classify(exc)
                if mapped is not None:
                    raise mapped from exc
                raise

    try:
        value = await retry(once, policy, what=f"{source} {what}")
    except OnlineError:
        raise
    except Exception as exc:
        detail = str(exc) if isinstance(exc, ScholarloopError) else f"{type(exc).__name__}: {exc}"
        raise OnlineError(f"{what} failed: {detail}", service=source) from exc
    if cache is not None:
        cache.set(key, value)
    return value
