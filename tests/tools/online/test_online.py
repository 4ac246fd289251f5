import copy
from pathlib import Path

import httpx
import pytest
import respx

from agent.core.errors import FetchError, NetworkDownError, OnlineError
from agent.core.settings import Settings, load_settings
from corpus.build import build_index
from corpus.embeddings import HashEmbedder
from corpus.search import LocalSearch
from corpus.store import Library
from tests.tools.online.conftest import pdf_bytes, recorded, replay
from tools.crossref import CrossrefClient, hit_from_crossref
from tools.fetch import fetch_pdf
from tools.online import Hit, merge_hits
from tools.online_search import OnlineSearch
from tools.semantic_scholar import SemanticScholarClient, hit_from_s2

S2 = "https://api.semanticscholar.org/graph/v1"
CR = "https://api.crossref.org/works"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(
        environ={},
        home=str(tmp_path / "home"),
        embedding__model="hash",
        online__enabled=True,
        online__cache_ttl_s=0,
        online__retries=2,
    )


@pytest.fixture
def searcher(tmp_path: Path, settings: Settings) -> LocalSearch:
    d = tmp_path / "papers"
    d.mkdir()
    (d / "local.md").write_text(
        "# Turing machines revisited\n\n2019. Computable numbers and Turing machines today."
    )
    build_index([d], tmp_path / "idx", settings)
    return LocalSearch(Library.open(tmp_path / "idx"), HashEmbedder(256))


@respx.mock
async def test_search_both_sources_merge_and_dedupe(searcher: LocalSearch, settings: Settings) -> None:
    respx.get(url__startswith=f"{S2}/paper/search").mock(return_value=replay("s2_paper_search_relevance"))
    respx.get(url__startswith=CR).mock(return_value=replay("crossref_works_query"))
    online = OnlineSearch(settings, searcher)
    outcome = await online.search("turing", limit=20)
    assert not outcome.warnings
    sources = {s for h in outcome.hits for s in h.sources}
    assert sources == {"semantic_scholar", "crossref", "local"}
    dois = [h.doi for h in outcome.hits if h.doi]
    assert len(dois) == len(set(dois))  # merged by DOI
    top = next(h for h in outcome.hits if "semantic_scholar" in h.sources)
    assert top.title and top.year and top.citation_count is not None and top.authors


def test_hits_carry_the_documented_fields() -> None:
    s2 = hit_from_s2(recorded("s2_paper_by_doi")["body"])
    assert s2.doi == "10.1073/pnas.1414271111" and s2.year == 2014 and s2.citation_count == 136
    assert s2.pdf_url and s2.pdf_url.endswith(".pdf") and s2.venue
    cr = hit_from_crossref(recorded("crossref_work_by_doi")["body"]["message"])
    assert cr.doi == "10.1371/journal.pone.0033693" and cr.title and cr.authors and cr.year


def test_merge_prefers_hits_found_by_both_and_unions_fields() -> None:
    a = [
        Hit(
            title="Paper One",
            doi="https://doi.org/10.1/ABC",
            sources=["semantic_scholar"],
            citation_count=5,
            pdf_url="https://x/y.pdf",
        ),
        Hit(title="Only S2", year=2020, sources=["semantic_scholar"]),
    ]
    b = [
        Hit(title="Paper one.", doi="10.1/abc", sources=["crossref"], retracted=True, venue="J"),
        Hit(title="Only  S2", year=2020, sources=["crossref"]),
    ]
    merged = merge_hits([a, b])
    assert len(merged) == 2
    first = merged[0]
    assert first.doi == "10.1/abc" and set(first.sources) == {"semantic_scholar", "crossref"}
    assert first.retracted and first.venue == "J" and first.pdf_url
    assert set(merged[1].sources) == {"semantic_scholar", "crossref"}  # title + year fallback


def test_hits_without_a_doi_get_a_stable_title_id() -> None:
    from tools.online import hit_doc_id

    a = Hit(title="EGFR T790M: Osimertinib!", year=2017, sources=["crossref"])
    b = Hit(title="egfr  t790m osimertinib", year=2017, sources=["semantic_scholar"])
    assert hit_doc_id(a) == hit_doc_id(b) == "online:egfr-t790m-osimertinib:2017"
    assert hit_doc_id(Hit(title="X", doi="10.1/abc", sources=["crossref"])) == "doi:10.1/abc"


def test_retraction_flag_from_crossref() -> None:
    item = copy.deepcopy(recorded("crossref_work_by_doi")["body"]["message"])
    assert not hit_from_crossref(item).retracted
    item["updated-by"] = [{"type": "retraction", "DOI": "10.1371/retraction.1", "label": "Retraction"}]
    assert hit_from_crossref(item).retracted


@respx.mock
async def test_year_filters_really_filter(searcher: LocalSearch, settings: Settings) -> None:
    route = respx.get(url__startswith=f"{S2}/paper/search").mock(
        return_value=replay("s2_paper_search_relevance")
    )
    cr = respx.get(url__startswith=CR).mock(return_value=replay("crossref_works_query"))
    # the recordings were made without a year filter, so they hold papers from 1985 to 2025:
    # what the sources send back out of range must still be filtered out here
    outcome = await OnlineSearch(settings, searcher).search("turing", year_min=2012, year_max=2014)
    assert "year=2012-2014" in str(route.calls[0].request.url)
    assert "from-pub-date%3A2012" in str(cr.calls[0].request.url)
    years = {h.year for h in outcome.hits}
    assert years and years <= {2012, 2013, 2014}
    assert {"semantic_scholar", "crossref"} <= {s for h in outcome.hits for s in h.sources}


@respx.mock
async def test_404_by_doi_is_none() -> None:
    respx.get(url__startswith=f"{S2}/paper/DOI:").mock(return_value=replay("s2_error_404_doi"))
    respx.get(url__startswith=f"{CR}/").mock(return_value=replay("crossref_error_404"))
    assert await SemanticScholarClient().paper_by_doi("10.1101/2024.04.01.587366") is None
    assert await CrossrefClient().work_by_doi("10.1371/notarealdoi") is None


@respx.mock
async def test_429_then_success(sleeps: list[float]) -> None:
    s2 = respx.get(url__startswith=f"{S2}/paper/search").mock(
        side_effect=[replay("s2_error_429"), replay("s2_paper_search_relevance")]
    )
    hits = await SemanticScholarClient(retries=2).search("turing", limit=5)
    assert len(hits) == 5 and s2.call_count == 2
    assert len(sleeps) == 1 and 0.5 <= sleeps[0] <= 1.0  # no Retry-After from this client: backoff
    limited = httpx.Response(
        429, text="slow down", headers={"retry-after": "7", "content-type": "text/plain"}
    )
    cr = respx.get(url__startswith=CR).mock(side_effect=[limited, replay("crossref_works_query")])
    hits = await CrossrefClient(retries=2).search("ecology", limit=2)
    assert hits and cr.call_count == 2 and sleeps[-1] == 7.0  # Crossref's Retry-After honoured


@respx.mock
async def test_rate_limit_that_outlasts_the_retries_is_an_online_error(sleeps: list[float]) -> None:
    limited = httpx.Response(429, text="slow down", headers={"retry-after": "Thu, 01 Jan 1970 00:00:00 GMT"})
    route = respx.get(url__startswith=CR).mock(return_value=limited)
    with pytest.raises(OnlineError, match=r"\[Crossref\] search failed: rate limit \(429\)"):
        await CrossrefClient(retries=1).search("ecology")
    assert route.call_count == 2 and sleeps == [0.0]  # an HTTP-date in the past: retry at once


@respx.mock
async def test_server_errors_are_retried(sleeps: list[float]) -> None:
    route = respx.get(url__startswith=CR).mock(
        side_effect=[httpx.Response(503, text="busy"), replay("crossref_works_query")]
    )
    assert await CrossrefClient(retries=2).search("ecology", limit=2)
    assert route.call_count == 2 and len(sleeps) == 1


@respx.mock
async def test_timeouts_are_retried_then_reported(sleeps: list[float]) -> None:
    route = respx.get(url__startswith=f"{S2}/paper/search").mock(side_effect=httpx.ReadTimeout("slow"))
    with pytest.raises(OnlineError, match="ReadTimeout"):
        await SemanticScholarClient(retries=2).search("turing")
    assert route.call_count == 3 and len(sleeps) == 2


@respx.mock
async def test_malformed_json_is_an_error_not_a_crash(searcher: LocalSearch, settings: Settings) -> None:
    respx.get(url__startswith=f"{S2}/paper/search").mock(
        return_value=httpx.Response(200, text="{not json", headers={"content-type": "application/json"})
    )
    respx.get(url__startswith=CR).mock(return_value=replay("crossref_works_query"))
    outcome = await OnlineSearch(settings, searcher).search("turing")
    assert any("Semantic Scholar" in w for w in outcome.warnings)
    assert any("crossref" in h.sources for h in outcome.hits)


@respx.mock
async def test_connection_refused_falls_back_to_local_at_once(
    searcher: LocalSearch, settings: Settings, sleeps: list[float]
) -> None:
    s2 = respx.get(url__startswith=f"{S2}/paper/search").mock(side_effect=httpx.ConnectError("refused"))
    cr = respx.get(url__startswith=CR).mock(side_effect=httpx.ConnectError("refused"))
    online = OnlineSearch(settings, searcher)
    outcome = await online.search("turing machines")
    assert outcome.offline and len(outcome.warnings) == 1 and "local library only" in outcome.warnings[0]
    assert [h.sources for h in outcome.hits] == [["local"]]
    assert s2.call_count == 1 and cr.call_count == 1 and sleeps == []  # no retry storm
    again = await online.search("turing")
    assert again.warnings == [] and s2.call_count == 1  # one warning; later searches stay local


@respx.mock
async def test_pdf_is_downloaded_content_addressed_and_ingested(
    searcher: LocalSearch, settings: Settings
) -> None:
    hit = hit_from_s2(recorded("s2_paper_by_doi")["body"])
    assert hit.pdf_url
    respx.get(hit.pdf_url).mock(
        return_value=httpx.Response(200, content=pdf_bytes(), headers={"content-type": "application/pdf"})
    )
    online = OnlineSearch(settings, searcher)
    added, warnings = await online.add_to_library([hit], fetch=True)
    assert warnings == [] and len(added) == 1
    paper = searcher.library.paper(added[0])
    assert paper.doi == "10.1073/pnas.1414271111" and paper.title == hit.title and not paper.abstract_only
    pdfs = list((searcher.library.root / "pdfs").glob("*.pdf"))
    assert len(pdfs) == 1 and len(pdfs[0].stem) == 64  # named by content, not by URL or title
    assert searcher.search("hypoxia collagen cross-linking", k=1)[0].chunk.doc_id == added[0]
    again, _ = await online.add_to_library([hit], fetch=True)
    assert again == []  # already in the library


@respx.mock
async def test_non_pdf_body_is_rejected_and_the_abstract_is_used(
    searcher: LocalSearch, settings: Settings
) -> None:
    hit = hit_from_s2(recorded("s2_paper_by_doi")["body"]).model_copy(
        update={"abstract": "An abstract about tissue."}
    )
    assert hit.pdf_url
    respx.get(hit.pdf_url).mock(
        return_value=httpx.Response(200, text="<html>login</html>", headers={"content-type": "text/html"})
    )
    added, warnings = await OnlineSearch(settings, searcher).add_to_library([hit], fetch=True)
    assert any("not a PDF (content-type text/html)" in w for w in warnings)
    assert len(added) == 1 and searcher.library.paper(added[0]).abstract_only


@respx.mock
async def test_fetch_safety(tmp_path: Path) -> None:
    with pytest.raises(FetchError, match="only http"):
        await fetch_pdf("file:///etc/passwd", tmp_path)
    respx.get("https://example.org/fake.pdf").mock(
        return_value=httpx.Response(
            200, content=b"<html>not a pdf</html>", headers={"content-type": "application/octet-stream"}
        )
    )
    with pytest.raises(FetchError, match="no %PDF header"):
        await fetch_pdf("https://example.org/fake.pdf", tmp_path)
    respx.get("https://example.org/big.pdf").mock(
        return_value=httpx.Response(
            200, content=b"%PDF-1.4" + b"0" * 5000, headers={"content-type": "application/pdf"}
        )
    )
    with pytest.raises(FetchError, match="too large"):
        await fetch_pdf("https://example.org/big.pdf", tmp_path, max_bytes=1000)
    respx.get("https://example.org/down.pdf").mock(side_effect=httpx.ConnectError("down"))
    with pytest.raises(NetworkDownError):
        await fetch_pdf("https://example.org/down.pdf", tmp_path)
    assert list(tmp_path.iterdir()) == []  # nothing half-written left behind


@respx.mock
async def test_paper_search_tool_adds_online_papers_to_the_run(
    searcher: LocalSearch, settings: Settings
) -> None:
    from agent.core.state import RunState
    from tools.base import ToolContext
    from tools.paper_search import paper_search

    respx.get(url__startswith=f"{S2}/paper/search").mock(return_value=replay("s2_paper_search_relevance"))
    respx.get(url__startswith=CR).mock(return_value=replay("crossref_works_query"))
    fetch_attempts = respx.route().mock(return_value=httpx.Response(404))  # every PDF host: not found
    before = len(searcher.library.papers)
    ctx = ToolContext(
        state=RunState(question="turing"),
        settings=settings.with_overrides(online={"add_k": 3}),
        llms={},
        searcher=searcher,
        online=OnlineSearch(settings, searcher),
    )
    observation = await paper_search(ctx, query="turing test machine intelligence")
    assert "from online search to the library" in observation
    new = searcher.library.papers[before:]
    assert 1 <= len(new) <= 3 and all(p.abstract_only for p in new)  # no PDF could be fetched: abstracts
    assert set(ctx.state.candidates) & {p.doc_id for p in new}
    assert fetch_attempts.call_count >= 1  # it tried the open-access PDFs first


def test_cli_search_online_json(searcher: LocalSearch, tmp_path: Path) -> None:
    import json

    from click.testing import CliRunner

    from agent.cli.main import cli

    with respx.mock:
        respx.get(url__startswith=f"{S2}/paper/search").mock(return_value=replay("s2_paper_search_relevance"))
        respx.get(url__startswith=CR).mock(side_effect=httpx.ConnectError("no route"))
        result = CliRunner().invoke(
            cli,
            [
                "--json",
                "--set",
                "embedding.model=hash",
                "--set",
                "online.cache_ttl_s=0",
                "search",
                "turing",
                "--online",
                "--year",
                "2012-2014",
                "--index",
                str(searcher.library.root),
            ],
        )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output[result.output.index("{") :])
    assert data["hits"] and all(2012 <= h["year"] <= 2014 for h in data["hits"])
    assert any("local library only" in w for w in data["warnings"])


@respx.mock
async def test_bulk_search_and_batch_lookup() -> None:
    respx.get(url__startswith=f"{S2}/paper/search/bulk").mock(return_value=replay("s2_paper_search_bulk"))
    hits = await SemanticScholarClient().search("kubernetes", limit=10, bulk=True)
    assert len(hits) == 10 and all(h.title for h in hits)
    respx.post(url__startswith=f"{S2}/paper/batch").mock(return_value=replay("s2_paper_batch"))
    ids = [
        "CorpusId:211530585",
        "CorpusId:470667",
        "10.2139/ssrn.2250500",
        "0f40b1f08821e22e859c6050916cec3667778613",
    ]
    found = await SemanticScholarClient().papers(ids)
    assert len(found) == 4 and found[0] is None  # the recording has null for an id it did not find
    assert sum(h is not None for h in found) >= 2


@respx.mock
async def test_disk_cache_serves_repeats_until_the_ttl(tmp_path: Path) -> None:
    from tools.online import DiskCache

    route = respx.get(url__startswith=CR).mock(return_value=replay("crossref_works_query"))
    client = CrossrefClient(cache=DiskCache(tmp_path / "cache", ttl_s=3600))
    first = await client.search("ecology", limit=2)
    second = await client.search("ecology", limit=2)
    assert first == second and route.call_count == 1
    expired = CrossrefClient(cache=DiskCache(tmp_path / "cache", ttl_s=0))
    await expired.search("ecology", limit=2)
    assert route.call_count == 2
