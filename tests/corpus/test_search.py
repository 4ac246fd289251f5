from pathlib import Path

import numpy as np
import pytest

from agent.core.settings import Settings
from corpus.build import build_index
from corpus.embeddings import HashEmbedder
from corpus.index import VectorIndex
from corpus.search import BM25, Filters, LocalSearch, singular, tokenize
from corpus.store import Library


@pytest.fixture
def searcher(tmp_path: Path, papers_dir: Path, settings: Settings) -> LocalSearch:
    root = tmp_path / "idx"
    build_index([papers_dir], root, settings)
    return LocalSearch(Library.open(root), HashEmbedder(256))


def doc_of(searcher: LocalSearch, title_word: str) -> str:
    return next(p.doc_id for p in searcher.library.papers if title_word in (p.title or "") + p.source)


def test_tokenize_and_bm25_rank_exact_terms() -> None:
    assert tokenize("The T790M mutation, and β-catenin's role") == ["t790m", "mutation", "catenin's", "role"]
    bm25 = BM25(
        ["kelch13 mutations slow clearance", "p53 loss in cancer", "kelch13 kelch13 kelch13 resistance"]
    )
    scores = bm25.scores("kelch13 resistance")
    assert scores.argmax() == 2 and scores[1] == 0


def test_coverage_weighs_a_questions_rare_terms_and_ignores_its_length() -> None:
    texts = [
        "kelch13 mutations slow parasite clearance in malaria",
        "malaria parasite clearance is slow in some patients",
        "malaria parasite drug resistance spreads",
    ]
    bm25 = BM25(texts)
    question = "Which kelch13 mutations slow malaria parasite clearance?"
    answering, topical = (bm25.coverage(question, t) for t in texts[:2])
    assert answering == pytest.approx(1.0)
    assert 0.0 < topical < 0.7  # every common word, none of the rare ones
    # a longer question with the same terms repeated covers the same share
    assert bm25.coverage(
        question + " kelch13 malaria", "kelch13 mutations slow parasite clearance malaria"
    ) == (pytest.approx(1.0))
    # a term no chunk holds weighs the most: no passage can answer a question about it
    unseen = bm25.coverage("alphavirus malaria", "malaria parasite clearance")
    assert unseen < 0.5
    assert bm25.coverage("the of and", "anything") == 1.0  # no terms: nothing to hold
    # plurals match their singular, both ways
    assert bm25.coverage("kelch13 mutation", "kelch13 mutations") == pytest.approx(1.0)
    assert bm25.coverage("parasites", "one parasite") == pytest.approx(1.0)
    forms = ["viruses", "studies", "diseases", "cases", "classes", "boxes", "virus", "analysis", "gas"]
    expected = ["virus", "study", "disease", "case", "class", "box", "virus", "analysis", "gas"]
    assert [singular(w) for w in forms] == expected


@pytest.mark.parametrize("method", ["bm25", "dense", "hybrid"])
def test_each_method_finds_the_right_paper(searcher: LocalSearch, method: str) -> None:
    hits = searcher.search("T790M resistance osimertinib", k=3, method=method)  # type: ignore[arg-type]
    assert hits and hits[0].chunk.doc_id == doc_of(searcher, "egfr")
    assert [h.rank for h in hits] == list(range(1, len(hits) + 1))


def test_excluded_documents_never_appear(searcher: LocalSearch) -> None:
    egfr = doc_of(searcher, "egfr")
    hits = searcher.search("T790M osimertinib EGFR", k=10, filters=Filters(exclude_doc_ids={egfr}))
    assert hits and all(h.chunk.doc_id != egfr for h in hits)
    papers = searcher.search_papers("T790M osimertinib EGFR", k=10, filters=Filters(exclude_doc_ids={egfr}))
    assert egfr not in {d for d, _ in papers}


def test_year_and_include_filters(searcher: LocalSearch) -> None:
    hits = searcher.search("mutation resistance cancer", k=10, filters=Filters(year_min=2018, year_max=2021))
    years = {searcher.library.paper(h.chunk.doc_id).year for h in hits}
    assert years and years <= {2019, 2021}
    only = doc_of(searcher, "malaria")
    hits = searcher.search("T790M", k=10, filters=Filters(include_doc_ids={only}))
    assert {h.chunk.doc_id for h in hits} <= {only}
    assert searcher.search("anything", filters=Filters(year_min=3000)) == []


def test_paper_level_ranking_aggregates_chunks(searcher: LocalSearch) -> None:
    papers = searcher.search_papers("p53 tumour suppressor apoptosis", k=2)
    assert papers[0][0] == doc_of(searcher, "tp53")
    assert len({d for d, _ in papers}) == len(papers)


def test_mmr_spreads_results_across_papers(tmp_path: Path, settings: Settings) -> None:
    # One paper repeats the query's words in every chunk; another mentions them once. Plain
    # ranking fills the top 3 with the repetitive paper; MMR must make room for the other.
    papers = tmp_path / "papers"
    papers.mkdir()
    sentence = "Kelch13 resistance mutations slow artemisinin parasite clearance in falciparum. "
    (papers / "repetitive.txt").write_text(sentence * 40)
    (papers / "other.txt").write_text(
        "Kelch13 resistance mutations were mapped in a field survey of malaria patients. " * 4
    )
    root = tmp_path / "idx"
    build_index([papers], root, settings)
    searcher = LocalSearch(Library.open(root), HashEmbedder(256))
    other = doc_of(searcher, "other")
    plain = searcher.search("kelch13 resistance mutations artemisinin clearance", k=3)
    diverse = searcher.search("kelch13 resistance mutations artemisinin clearance", k=3, mmr_lambda=0.3)
    assert len(plain) == len(diverse) == 3
    assert other not in {h.chunk.doc_id for h in plain}
    assert other in {h.chunk.doc_id for h in diverse}


@pytest.mark.parametrize("kind", ["flat", "hnsw", "ivf"])
def test_vector_index_kinds_agree_on_an_easy_query(kind: str, tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((2000, 32)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = VectorIndex(32, kind).build(vectors)  # type: ignore[arg-type]
    scores, ids = index.search(vectors[7], 5)
    assert ids[0] == 7 and scores[0] == pytest.approx(1.0, abs=1e-4)
    _, ids = index.search(vectors[7], 5, allowed=range(100, 200))
    assert len(ids) and all(100 <= i < 200 for i in ids)
    index.save(tmp_path / "x.index")
    again = VectorIndex.load(tmp_path / "x.index", kind, 32)  # type: ignore[arg-type]
    assert again.search(vectors[7], 1)[1][0] == 7
