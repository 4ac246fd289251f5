"""``Answer.to_html``: structure, escaping of untrusted text, the marked quote, citation links."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from agent.core.html import answer_body, answer_html, locate_quote
from agent.core.state import (
    Answer,
    CitationCheck,
    Claim,
    Evidence,
    Reference,
    Status,
    Step,
    Verdict,
    VerificationReport,
)
from agent.llm.types import Usage

EGFR_TEXT = (
    "Activating EGFR mutations predict response to TKIs.\n\nThe T790M mutation confers resistance to "
    "gefitinib. Osimertinib   remains ACTIVE against tumours carrying T790M."
)
HOSTILE_TEXT = (
    "Kinase notes. <script>alert('pwned')</script> <img src=x onerror=\"alert(1)\"> "
    'Gefitinib & erlotinib lose activity "in vivo" once T790M appears.'
)


def evidence(
    key: str, text: str, *, doc: str, paper: str, quote: str = "", pages: tuple[int, int] = (1, 1)
) -> Evidence:
    return Evidence(
        key=key,
        chunk_id=f"{doc}:0",
        doc_id=doc,
        paper_key=paper,
        page_start=pages[0],
        page_end=pages[1],
        text=text,
        quote=quote,
        score=8,
    )


def supported(key: str) -> CitationCheck:
    return CitationCheck(key=key, verdict=Verdict.supported, p_support=0.93, method="judge+quote")


@pytest.fixture
def answer() -> Answer:
    kept = [
        Claim(
            text="Osimertinib remains active against tumours carrying T790M.",
            citations=["Egfr2017 pp. 3-4"],
            quote="osimertinib remains active against tumours carrying T790M",  # case and spaces differ
            verdict=Verdict.supported,
            checks=[supported("Egfr2017 pp. 3-4")],
        ),
        Claim(
            text="Gefitinib loses activity once T790M appears <b>in vivo</b>.",
            citations=["Notes2020 p. 2"],
            quote="a quote the model made up",
            verdict=Verdict.misattributed,
            checks=[
                CitationCheck(
                    key="Egfr2017 pp. 3-4",
                    verdict=Verdict.unsupported,
                    method="judge",
                    suggested_key="Notes2020 p. 2",
                ),
                supported("Notes2020 p. 2"),
            ],
        ),
    ]
    removed = Claim(
        text="Aspirin cures lung cancer.",
        citations=["Smith2023 p. 1"],
        verdict=Verdict.fabricated,
        checks=[CitationCheck(key="Smith2023 p. 1", verdict=Verdict.fabricated, method="unknown-key")],
    )
    return Answer(
        question="Which inhibitor stays active against T790M? <i>really</i>",
        status=Status.answered,
        answer=(
            "Osimertinib remains active against tumours carrying T790M [Egfr2017 pp. 3-4]. "
            "Gefitinib loses activity once T790M appears <b>in vivo</b> [Notes2020 p. 2]."
        ),
        claims=kept,
        evidence=[
            evidence("Egfr2017 pp. 3-4", EGFR_TEXT, doc="d1", paper="Egfr2017", pages=(3, 4)),
            evidence(
                "Notes2020 p. 2",
                HOSTILE_TEXT,
                doc="d2",
                paper="Notes2020",
                quote="Gefitinib & erlotinib lose activity in vivo",
                pages=(2, 2),
            ),
            evidence("Tumour2015 p. 1", "TP53 encodes p53.", doc="d3", paper="Tumour2015"),
        ],
        references=[
            Reference(
                number=1, key="Egfr2017", doc_id="d1", entry="Lo (2017). EGFR T790M.", bibtex="@misc{x}"
            ),
            Reference(
                number=2, key="Notes2020", doc_id="d2", entry="Notes <em>(2020)</em>.", bibtex="@misc{y}"
            ),
        ],
        verification=VerificationReport(
            claims=[*kept, removed],
            faithfulness=0.67,
            citation_precision=0.5,
            citation_recall=0.33,
            counts={"supported": 1, "misattributed": 1, "fabricated": 1},
            removed_claims=[removed],
            repaired=1,
        ),
        usage={"answer": Usage(role="answer", model="local:qwen", prompt_tokens=1200, completion_tokens=34)},
        seconds=12.3,
        trace=[
            Step(
                tool="paper_search",
                arguments={"query": "T790M <script>"},
                observation="Found 3 paper(s).",
                seconds=0.4,
            ),
            Step(tool="verify_citations", observation="Verified 3 claim(s).", seconds=1.2, error=None),
        ],
    )


class Tags(HTMLParser):
    """Every start tag with its attributes, and the text inside each element carrying an id."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def tags(page: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = Tags()
    parser.feed(page)
    return parser.tags


def test_page_is_a_complete_self_contained_document(answer: Answer) -> None:
    page = answer.to_html()
    assert page == answer_html(answer)
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    found = tags(page)
    names = {t for t, _ in found}
    assert {"html", "head", "style", "body", "article", "mark"} <= names
    assert "script" not in names and "link" not in names and "img" not in names and "iframe" not in names
    # nothing is loaded: the only links are anchors inside the page
    assert all(a.get("href", "").startswith("#") for t, a in found if t == "a")
    assert not [a for _, a in found if "src" in a]
    assert "@import" not in page and "url(" not in page


def test_page_shows_question_status_claims_verification_steps_and_usage(answer: Answer) -> None:
    page = answer.to_html()
    assert "Which inhibitor stays active against T790M? &lt;i&gt;really&lt;/i&gt;" in page
    assert 'class="sl-badge sl-s-answered"' in page
    claims = re.findall(r'<li class="sl-claim[^"]*" data-verdict="(\w+)"', page)
    assert claims == ["supported", "misattributed", "fabricated"]  # the removed claim comes last
    assert 'class="sl-claim sl-claim-removed" data-verdict="fabricated"' in page
    assert "Removed by the citation check" in page
    for verdict in ("supported", "misattributed", "unsupported", "fabricated"):
        assert f'class="sl-badge sl-v-{verdict}"' in page  # each verdict gets its colour class
    assert ".sl-v-contradicted{" in page and ".sl-v-supported{" in page
    assert "Faithfulness</th><td>0.67" in page and "Citations repaired</th><td>1" in page
    assert "<code>paper_search(query=&#x27;T790M &lt;script&gt;&#x27;)</code>" in page
    assert "Verified 3 claim(s)." in page
    assert "1,234 tokens" in page and "12.3 s" in page and "local:qwen" in page
    assert "[1] <strong>Egfr2017</strong>: Lo (2017). EGFR T790M." in page
    assert "pp. 3–4" in page and "p. 2" in page


def test_untrusted_passage_and_model_text_are_shown_as_text(answer: Answer) -> None:
    page = answer.to_html()
    assert "<script" not in page.lower() and "<img" not in page.lower() and "<b>" not in page
    assert "&lt;script&gt;alert(&#x27;pwned&#x27;)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in page
    assert "Notes &lt;em&gt;(2020)&lt;/em&gt;." in page
    assert "once T790M appears &lt;b&gt;in vivo&lt;/b&gt;" in page


def test_the_supporting_quote_is_marked_in_its_passage(answer: Answer) -> None:
    page = answer.to_html()
    marks = re.findall(r"<mark>(.*?)</mark>", page, re.S)
    # the claim's quote, found despite case and spacing, marked in the paper's own characters
    assert "Osimertinib   remains ACTIVE against tumours carrying T790M" in marks
    # the second claim's quote is not in its passage: the evidence's quote is marked instead
    assert "Gefitinib &amp; erlotinib lose activity &quot;in vivo" in marks
    assert "The claim's quote is not in this passage: “a quote the model made up”" in page
    assert len(marks) == 2  # passages no claim cites carry no mark


def test_every_citation_links_to_its_passage(answer: Answer) -> None:
    page = answer.to_html()
    found = tags(page)
    passages = {
        a["id"]: a["data-key"]
        for t, a in found
        if t == "div" and "sl-passage" in (a.get("class") or "").split()
    }
    assert set(passages.values()) == {e.key for e in answer.evidence}
    links = re.findall(r'<a class="sl-cite" href="#([^"]+)">\[([^\]]+)\]</a>', page)
    cited = {k for c in answer.claims for k in c.citations}
    assert cited <= {key for _, key in links}
    for anchor, key in links:
        assert passages[anchor] == key
    # the answer text's inline keys are links too
    text = page.split('<section class="sl-text">')[1].split("</section>")[0]
    assert text.count('class="sl-cite"') == 2
    # a key nothing was retrieved for is shown, but links nowhere
    assert '<span class="sl-nokey" title="no passage has this key">[Smith2023 p. 1]</span>' in page


def test_an_insufficient_answer_links_the_passages_it_lists() -> None:
    answer = Answer(
        question="What does TP53 encode?",
        status=Status.insufficient_evidence,
        answer='Insufficient evidence to answer.\n\nPassages read:\n- [Tumour2015 p. 1] "TP53 encodes p53."',
        evidence=[
            evidence(
                "Tumour2015 p. 1",
                "TP53 encodes p53.",
                doc="d3",
                paper="Tumour2015",
                quote="TP53 encodes p53.",
            )
        ],
        error="wall-clock budget used up",
    )
    body = answer_body(answer)
    assert body.startswith('<article class="sl-answer">') and "<html" not in body
    assert 'sl-s-insufficient_evidence">insufficient evidence<' in body
    assert '<a class="sl-cite" href="#ev-1">[Tumour2015 p. 1]</a>' in body and 'id="ev-1"' in body
    assert "<br>" in body and "Claims and verdicts" not in body
    assert '<p class="sl-error">wall-clock budget used up</p>' in body
    assert "(not cited in the answer)" in body


@pytest.mark.parametrize(
    ("quote", "passage", "expected"),
    [
        (
            "remains active against T790M",
            "Osimertinib remains active against T790M.",
            "remains active against T790M",
        ),
        (
            "REMAINS  active, against T790M",
            "x remains active against T790M y",
            "remains active against T790M",
        ),
        # a word changed in a short quote: too few of its word 5-grams occur to count as quoted
        (
            "the T790M mutation confers resistance to gefitinib and also to erlotinib in patients",
            "Known: the T790M mutation confers resistance to gefitinib and to erlotinib in patients.",
            None,
        ),
        ("a quote that is nowhere", "Osimertinib remains active against T790M.", None),
        ("short", "short", None),  # under quote_in's minimum length
    ],
)
def test_locate_quote(quote: str, passage: str, expected: str | None) -> None:
    span = locate_quote(quote, passage)
    if expected is None:
        assert span is None
    else:
        assert span is not None and passage[span[0] : span[1]] == expected


def test_locate_quote_marks_a_retyped_quote_by_its_matching_words() -> None:
    passage = "Intro. " + " ".join(f"w{i}" for i in range(40)) + ". End."
    quote = " ".join(f"w{i}" for i in range(5, 35)).replace("w20", "W20,")  # retyped punctuation
    quote = quote.replace("w34", "v34")  # the last word wrong: not verbatim, still 96% of its 5-grams
    span = locate_quote(quote, passage)
    assert span is not None
    assert passage[span[0] : span[1]].startswith("w5 w6") and passage[span[0] : span[1]].endswith("w33")


def test_locate_quote_keeps_offsets_right_past_case_folding_that_changes_length() -> None:
    passage = "Straße İstanbul: osimertinib remains active against T790M."
    span = locate_quote("osimertinib remains active", passage)
    assert span is None or passage[span[0] : span[1]] == "osimertinib remains active"
