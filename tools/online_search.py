"""Online paper search: Semantic Scholar and Crossref at once, merged with the local library.

New hits enter the library: their open-access PDF when one can be fetched and read, otherwise
their abstract, marked ``abstract_only`` so the answer can say so. When the network is down
the first failure prints one warning, and from then on the :class:`~agent.api.Session` searches locally only.
"""

from __future__ import annotations

import asyncio
import json
import logging
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from agent.core.errors import NetworkDownError, OnlineError
from agent.core.settings import Settings
from corpus.build import BuildReport, build_index
from corpus.search import Filters, LocalSearch
from corpus.store import Library
from tools.crossref import CrossrefClient
from tools.fetch import fetch_pdf
from tools.online import DiskCache, Hit, hit_doc_id, in_years, merge_hits, normalise_doi
from tools.semantic_scholar import SemanticScholarClient

__all__ = ["OnlineSearch", "SearchOutcome"]

log = logging.getLogger(__name__)


@dataclass
class SearchOutcome:
    hits: list[Hit]
    warnings: list[str] = field(default_factory=list)
    offline: bool = False


class OnlineSearch:
    def __init__(
        self,
        settings: Settings,
        searcher: LocalSearch,
        *,
        semantic_scholar: SemanticScholarClient | None = None,
        crossref: CrossrefClient | None = None,
    ) -> None:
        cfg = settings.online
        cache = DiskCache(settings.home / "http-cache", cfg.cache_ttl_s)
        self.settings = settings
        self.searcher = searcher
        self.s2 = semantic_scholar or (
            SemanticScholarClient(timeout=cfg.timeout_s, cache=cache, retries=cfg.retries)
            if cfg.semantic_scholar
            else None
        )
        self.crossref = crossref or (
            CrossrefClient(timeout=cfg.timeout_s, cache=cache, retries=cfg.retries) if cfg.crossref else None
        )
        self.offline = False
        self.warned = False

    @property
    def library(self) -> Library:
        return self.searcher.library

    def _local_hits(self, query: str, year_min: int | None, year_max: int | None, limit: int) -> list[Hit]:
        hits = []
        for doc_id, score in self.searcher.search_papers(
            query, limit, filters=Filters(year_min=year_min, year_max=year_max)
        ):
            p = self.library.paper(doc_id)
            hits.append(
                Hit(
                    title=p.title or p.key,
                    authors=p.authors,
                    year=p.year,
                    venue=p.venue,
                    doi=p.doi,
                    sources=["local"],
                    source_ids={"local": doc_id},
                    rank_score=score,
                )
            )
        return hits

    async def search(
        self,
        query: str,
        *,
        year_min: int | None = None,
        year_max: int | None = None,
        limit: int | None = None,
    ) -> SearchOutcome:
        limit = limit or self.settings.online.max_results
        outcome = SearchOutcome(hits=[])
        groups: list[list[Hit]] = [self._local_hits(query, year_min, year_max, limit)]
        clients = [c for c in (self.s2, self.crossref) if c is not None] if not self.offline else []
        results = await asyncio.gather(
            *(c.search(query, limit=limit, year_min=year_min, year_max=year_max) for c in clients),
            return_exceptions=True,
        )
        for client, result in zip(clients, results, strict=True):
            name = "Semantic Scholar" if client is self.s2 else "Crossref"
            if isinstance(result, NetworkDownError):
                self.offline = True
                if not self.warned:
                    self.warned = True
                    message = f"online search unavailable ({result}); answering from the local library only"
                    log.info(message)  # the caller shows outcome.warnings once
                    outcome.warnings.append(message)
            elif isinstance(result, BaseException):
                outcome.warnings.append(f"{name}: {result}")
            else:
                groups.append(result)
        outcome.offline = self.offline
        outcome.hits = [h for h in merge_hits(groups) if in_years(h, year_min, year_max)]
        return outcome

    def known(self, hit: Hit) -> str | None:
        """The doc id of a hit already in the library (by DOI, else the local id)."""
        if "local" in hit.source_ids:
            return hit.source_ids["local"]
        doi = normalise_doi(hit.doi)
        return self.library.doc_for_doi(doi) if doi else None

    async def _ingest(
        self, path: Path, overrides: dict[str, dict[str, object]] | None
    ) -> tuple[BuildReport, list[str]]:
        """Index one file into the open library (off the loop); returns the report and new doc ids."""
        before = len(self.library.papers)
        report = await asyncio.to_thread(
            build_index,
            [path],
            self.library.root,
            self.settings,
            library=self.library,
            embedder=self.searcher.embedder,
            paper_overrides=overrides,
        )
        return report, [p.doc_id for p in self.library.papers[before:]]

    async def add_to_library(self, hits: list[Hit], *, fetch: bool) -> tuple[list[str], list[str]]:
        """Add new hits (PDF when possible, else abstract); returns (doc ids, warnings)."""
        added: list[str] = []
        warnings: list[str] = []
        records: list[dict[str, object]] = []
        pdf_dir = self.library.root / "pdfs"
        for hit in hits:
            if self.known(hit) is not None:
                continue
            meta: dict[str, object] = {
                "title": hit.title,
                "authors": hit.authors,
                "year": hit.year,
                "doi": hit.doi,
                "venue": hit.venue,
            }
            if fetch and hit.pdf_url and not self.offline:
                try:
                    path = await fetch_pdf(
                        hit.pdf_url,
                        pdf_dir,
                        max_bytes=self.settings.online.max_pdf_mb * 1024 * 1024,
                        timeout_s=self.settings.online.timeout_s,
                    )
                    report, new_ids = await self._ingest(path, {str(path): meta})
                    if report.indexed:
                        added += new_ids
                        continue
                    warnings.append(
                        f"{hit.pdf_url}: " + "; ".join(i.reason for i in report.failed + report.skipped)
                    )
                except NetworkDownError:
                    self.offline = True
                except OnlineError as exc:  # FetchError included: the message says why
                    warnings.append(str(exc))
            if hit.abstract:
                doc_id = hit_doc_id(hit)
                records.append(
                    {
                        "doc_id": doc_id,
                        "text": hit.abstract,
                        "abstract_only": True,
                        "source": ",".join(hit.sources),
                        **meta,
                    }
                )
        if records:
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / "online-abstracts.jsonl"
                path.write_text("".join(json.dumps(r) + "\n" for r in records))
                added += (await self._ingest(path, None))[1]
        return added, warnings
