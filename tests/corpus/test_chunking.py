import itertools

import pytest

from agent.core.models import Chunk, Document, Page, Paper
from corpus.chunking import chunk_document


def doc(*pages: str) -> Document:
    return Document(
        paper=Paper(doc_id="d1", key="Lo2020", n_pages=len(pages)),
        pages=[Page(number=i + 1, text=t) for i, t in enumerate(pages)],
    )


SENTENCES = " ".join(f"Sentence number {i} talks about kinase inhibitors and resistance." for i in range(60))


def test_every_chunk_is_an_exact_slice_of_the_document() -> None:
    d = doc(SENTENCES[:1500], SENTENCES[1500:])
    chunks = chunk_document(d, chunk_chars=500, overlap_chars=100)
    assert len(chunks) > 4
    for c in chunks:
        assert d.text[c.char_start : c.char_end] == c.text
        assert c.doc_id == "d1" and c.key == "Lo2020"


def test_chunks_end_on_sentence_boundaries_and_overlap() -> None:
    chunks = chunk_document(doc(SENTENCES), chunk_chars=500, overlap_chars=100)
    for c in chunks[:-1]:
        assert c.text.endswith("."), c.text[-30:]
        assert len(c.text) <= 500
    for a, b in itertools.pairwise(chunks):
        assert b.char_start < a.char_end  # overlap
        assert b.char_start > a.char_start  # progress
    # nothing is lost: the union of chunks covers the text
    covered = set()
    for c in chunks:
        covered.update(range(c.char_start, c.char_end))
    text = doc(SENTENCES).text
    assert all(i in covered for i, ch in enumerate(text) if not ch.isspace())


def test_page_ranges_and_citations() -> None:
    d = doc("A" * 10 + ". Intro sentence here.", "Methods sentence. " * 5, "Results.")
    chunks = chunk_document(d, chunk_chars=10_000, overlap_chars=0)
    assert len(chunks) == 1
    assert (chunks[0].page_start, chunks[0].page_end) == (1, 3)
    assert chunks[0].citation == "Lo2020 pp. 1-3"
    small = chunk_document(d, chunk_chars=200, overlap_chars=0)
    assert small[0].page_start == 1
    assert small[-1].page_end == 3
    assert (
        Chunk(
            chunk_id="x", doc_id="d", key="K", text="t", char_start=0, char_end=1, page_start=4, page_end=4
        ).citation
        == "K p. 4"
    )


def test_a_document_without_pages_gives_chunks_without_pages() -> None:
    """A text file or JSONL record (``n_pages`` None) is held as page 1, but never cited as "p. 1"."""
    d = Document(paper=Paper(doc_id="d1", key="Lo2020"), pages=[Page(number=1, text=SENTENCES)])
    chunks = chunk_document(d, chunk_chars=500, overlap_chars=100)
    assert len(chunks) > 1
    assert all(c.page_start is None and c.page_end is None and c.citation == "Lo2020" for c in chunks)


def test_text_without_sentence_ends_is_cut_at_words_then_hard() -> None:
    words = "word " * 400
    for c in chunk_document(doc(words), chunk_chars=300, overlap_chars=50):
        assert not c.text.startswith("ord")  # cut at whitespace, not mid-word
    blob = "x" * 1000
    chunks = chunk_document(doc(blob), chunk_chars=300, overlap_chars=0)
    assert "".join(c.text for c in chunks) == blob


def test_empty_document_and_bad_size() -> None:
    assert chunk_document(doc("")) == []
    with pytest.raises(ValueError, match="positive"):
        chunk_document(doc("text"), chunk_chars=0)


def test_an_overlap_starts_at_a_sentence_start_never_mid_word() -> None:
    # a chunk that ends at a sentence end used to start its successor at a raw offset ("he spread …")
    text = " ".join(
        f"Finding {i} shows that filamentous phage spread antibiotic resistance genes in soil."
        for i in range(40)
    )
    d = doc(text)
    chunks = chunk_document(d, chunk_chars=600, overlap_chars=150)
    assert len(chunks) > 4
    for c in chunks[1:]:
        assert c.text.startswith("Finding "), c.text[:30]
    # with no sentence end inside the overlap window, it still starts at a word
    words = " ".join(f"word{i}" for i in range(600))
    for c in chunk_document(doc(words), chunk_chars=500, overlap_chars=100)[1:]:
        assert c.text.startswith("word"), c.text[:20]
