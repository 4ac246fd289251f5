"""Evidence keys name pages only where a document has them: a PDF's "p. 2", never a made-up "p. 1"."""

import json
from pathlib import Path

from agent.core.models import Document, ScoredChunk
from agent.core.state import Evidence, RunState
from corpus.chunking import chunk_document
from corpus.keys import CitationKeys
from corpus.readers import read_path
from tests.corpus.pdfs import make_pdf
from tools.gather_evidence import evidence_key

SENTENCES = " ".join(f"Sentence {i} says that osimertinib stays active against T790M." for i in range(40))


def read_keyed(path: Path) -> Document:
    (doc,) = read_path(path)
    assert isinstance(doc, Document), doc
    CitationKeys().assign(doc.paper)
    return doc


def keys(doc: Document) -> list[str]:
    """The key each chunk's passage is stored under, gathered in order into one run."""
    state = RunState(question="q")
    for chunk in chunk_document(doc, chunk_chars=400, overlap_chars=0):
        key = evidence_key(state, ScoredChunk(chunk=chunk, score=1.0))
        state.evidence[key] = Evidence(
            key=key, chunk_id=chunk.chunk_id, doc_id=chunk.doc_id, paper_key=chunk.key, text=chunk.text
        )
    return list(state.evidence)


def test_a_jsonl_record_is_cited_without_a_page(tmp_path: Path) -> None:
    path = tmp_path / "corpus.jsonl"
    row = {"doc_id": "x:1", "title": "T790M", "authors": ["Kyle Lo"], "year": 2020, "text": SENTENCES}
    path.write_text(json.dumps(row) + "\n")
    doc = read_keyed(path)
    assert doc.paper.n_pages is None
    found = keys(doc)
    assert len(found) > 2
    assert found[:3] == ["Lo2020", "Lo2020 #2", "Lo2020 #3"]


def test_a_text_file_is_cited_without_a_page(tmp_path: Path) -> None:
    path = tmp_path / "egfr.md"
    path.write_text(f"# Osimertinib and T790M\n\n2017. {SENTENCES}")
    assert keys(read_keyed(path))[:2] == ["Osimertinib2017", "Osimertinib2017 #2"]


def test_a_pdf_chunk_keeps_its_page(tmp_path: Path) -> None:
    path = tmp_path / "paper.pdf"
    first = "EGFR T790M resistance in lung cancer was studied in 2020. " * 8
    path.write_bytes(make_pdf([first, "Results on page two. " * 20], author="Kyle Lo"))
    doc = read_keyed(path)
    assert doc.paper.n_pages == 2
    assert keys(doc) == ["Lo2020 p. 1", "Lo2020 pp. 1-2", "Lo2020 p. 2"]
