"""agent.render on hand-made run states: what a reader sees, and the last guard on citation keys."""

from agent.core.models import Paper
from agent.core.state import INSUFFICIENT, NO_ANSWER, Claim, Evidence, RunState, Status, no_answer
from agent.render import bibtex, reference_entry, references, render_text, status_of

LO = Paper(
    doc_id="d1",
    key="Lo2020",
    title="S2ORC: The Semantic Scholar Open Research Corpus.",
    authors=["Kyle Lo", "Lucy Lu Wang", "Mark Neumann", "Rodney Kinney"],
    year=2020,
    doi="10.18653/v1/2020.acl-main.447",
    venue="ACL",
)
EGFR = Paper(doc_id="d2", key="Egfr2017", title="Osimertinib {and} T790M", source="egfr.md")


def evidence(key: str, doc: str, score: int, text: str, quote: str = "") -> Evidence:
    return Evidence(
        key=key, chunk_id=key, doc_id=doc, paper_key=key.split()[0], text=text, score=score, quote=quote
    )


def state(**kw: object) -> RunState:
    s = RunState(question="How big is S2ORC?", papers={"d1": LO, "d2": EGFR})
    s.evidence = {
        "Lo2020 p. 2": evidence("Lo2020 p. 2", "d1", 9, "S2ORC has 81.1M papers; 8.1M with full text."),
        "Lo2020 p. 3": evidence("Lo2020 p. 3", "d1", 6, "the corpus is built from many publishers."),
        "Egfr2017 p. 1": evidence("Egfr2017 p. 1", "d2", 2, "Osimertinib remains active against T790M."),
    }
    for name, value in kw.items():
        setattr(s, name, value)
    return s


def test_only_keys_of_gathered_evidence_are_rendered() -> None:
    s = state(
        claims=[
            Claim(text="S2ORC holds 81.1M papers.", citations=["Lo2020 p. 2", "Smith2099 p. 1"]),
            Claim(text="A claim citing only a made-up key.", citations=["Nobody2001"]),
        ],
        limitations="Counts are as of 2020.",
    )
    text = render_text(s)
    assert text == "S2ORC holds 81.1M papers [Lo2020 p. 2].\n\nLimitations: Counts are as of 2020."
    assert status_of(s) == Status.answered


def test_references_are_numbered_once_per_cited_paper_in_citation_order() -> None:
    s = state(
        claims=[
            Claim(text="a", citations=["Egfr2017 p. 1"]),
            Claim(text="b", citations=["Lo2020 p. 2", "Lo2020 p. 3", "Ghost p. 9"]),
        ]
    )
    refs = references(s)
    assert [(r.number, r.key, r.doc_id) for r in refs] == [(1, "Egfr2017", "d2"), (2, "Lo2020", "d1")]
    assert refs[1].doi == LO.doi


def test_reference_entry_and_bibtex() -> None:
    entry = reference_entry(LO)
    assert entry == (
        "Kyle Lo, Lucy Lu Wang, Mark Neumann, et al. (2020). S2ORC: The Semantic Scholar Open Research "
        "Corpus. ACL. https://doi.org/10.18653/v1/2020.acl-main.447"
    )
    assert reference_entry(EGFR) == "(n.d.). Osimertinib {and} T790M."
    bib = bibtex(EGFR)
    assert bib.startswith("@misc{Egfr2017,") and "{and}" not in bib and "howpublished = {egfr.md}" in bib
    assert bibtex(LO).startswith("@article{Lo2020,") and "journal = {ACL}" in bibtex(LO)


def test_no_claim_says_insufficient_and_lists_the_papers_own_words() -> None:
    s = state(summary="The model's unchecked summary that must not be shown.")
    text = render_text(s)
    assert text.startswith(f"{NO_ANSWER} the question.")
    assert "unchecked summary" not in text
    lines = text.splitlines()
    assert lines[2] == "Passages read (not enough to answer):"
    # ranked as the answer step ranks them; a chunk cut mid-sentence starts at its next sentence
    assert lines[3].startswith('- [Lo2020 p. 2] S2ORC: The Semantic Scholar Open Research Corpus. "S2ORC has')
    assert lines[4].startswith("- [Lo2020 p. 3]") and len(lines) == 6
    assert status_of(s) == Status.insufficient_evidence


def test_a_reason_written_by_scholarloop_is_kept() -> None:
    s = state(summary=no_answer("the evidence gate failed"))
    assert render_text(s).startswith(f"{NO_ANSWER}: the evidence gate failed")


def test_multiple_choice_renders_the_letter_and_its_citations() -> None:
    options = ["81.1M", "12M", INSUFFICIENT]
    s = state(options=options, choice="A", claims=[Claim(text="81.1M", citations=["Lo2020 p. 2", "X p. 1"])])
    assert render_text(s) == "A) 81.1M [Lo2020 p. 2]"
    assert status_of(s) == Status.answered
    abstained = state(options=options, choice="C")
    assert render_text(abstained) == f"C) {INSUFFICIENT}"
    assert status_of(abstained) == Status.insufficient_evidence
    assert render_text(state(options=options, choice=None)) == INSUFFICIENT
