"""Model-free claim decomposition: where a drafted claim is cut, and where it is left whole."""

import pytest

from agent.core.claims import (
    atomic_parts,
    best_quote,
    dedupe,
    drop_repeats,
    is_fragment,
    looks_compound,
    mend_fragments,
    split_claim,
    tidy,
)
from agent.core.state import Claim


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        # a semicolon and a sentence end are the writer's own cuts
        (
            "Knockout cut growth by 40% at 72 h; ABC1 acts through the MAPK pathway in cells.",
            ["Knockout cut growth by 40% at 72 h", "ABC1 acts through the MAPK pathway in cells"],
        ),
        (
            "The virus was detected in 12 patients, whereas controls showed no infection. "
            "Patients were treated with remdesivir daily.",
            [
                "The virus was detected in 12 patients",
                "Controls showed no infection",
                "Patients were treated with remdesivir daily",
            ],
        ),
        # a list is one statement: "and" is never a cut
        (
            "IL-25, IL-33, and TSLP are type 2 cytokines expressed by epithelial cells.",
            ["IL-25, IL-33, and TSLP are type 2 cytokines expressed by epithelial cells"],
        ),
        # a fragment stays with the statement it qualifies
        (
            "Hepcidin is stimulated by inflammation. Mainly.",
            ["Hepcidin is stimulated by inflammation. Mainly"],
        ),
        ("Growth fell, but slowly.", ["Growth fell, but slowly"]),
    ],
)
def test_atomic_parts(text: str, parts: list[str]) -> None:
    assert atomic_parts(text) == parts


def test_each_part_keeps_the_citations_and_the_quote_sentence_it_rests_on() -> None:
    claim = Claim(
        text="Knockout cut growth by 40%; ABC1 signals through MAPK in HeLa cells.",
        citations=["Ng2019 p. 4", "Ruiz2021"],
        quote="Knockout of ABC1 cut growth by 40%. In HeLa cells ABC1 signals through MAPK.",
    )
    first, second = split_claim(claim, atomic_parts(claim.text))
    assert first.citations == second.citations == ["Ng2019 p. 4", "Ruiz2021"]
    assert first.quote == "Knockout of ABC1 cut growth by 40%."
    assert second.quote == "In HeLa cells ABC1 signals through MAPK."
    assert split_claim(claim, [claim.text]) == [claim]
    assert best_quote("Unrelated words entirely here", claim.quote) == claim.quote


def test_repeated_claims_are_merged_with_all_their_citations() -> None:
    claims = [
        Claim(text="Hepcidin is stimulated by inflammation.", citations=["A"], quote=""),
        Claim(text="hepcidin is stimulated by inflammation", citations=["B", "A"], quote="q"),
        Claim(text="Hepcidin blocks iron export.", citations=["A"]),
    ]
    merged = dedupe(claims)
    assert [c.citations for c in merged] == [["A", "B"], ["A"]]
    assert merged[0].quote == "q" and claims[0].citations == ["A"]  # the input is not changed


def test_only_long_claims_with_a_conjunction_go_to_the_model() -> None:
    assert not looks_compound("Remdesivir shortened recovery and reduced oxygen need.")
    assert looks_compound(
        "Remdesivir shortened recovery to 10 days in hospitalised adults and reduced the need for "
        "supplemental oxygen in the treated group of the trial."
    )


def test_a_sentence_cut_across_two_claims_is_rejoined_and_a_lone_fragment_dropped() -> None:
    claims = [
        Claim(
            text="Filamentous phage are immunogenic, as well as a potential route to",
            citations=["A"],
            quote="q",
        ),
        Claim(
            text="the spread of antibiotic resistance genes (Lin et al., 2011) .", citations=["A"], quote="q"
        ),
        Claim(
            text="Phage numbers rose and fell with the seasons (Hofer and Sommaruga, 2001).", citations=["B"]
        ),
        Claim(text="of the viral ecosystems", citations=["B"]),
    ]
    mended, dropped = mend_fragments(claims)
    assert [c.text for c in mended] == [
        "Filamentous phage are immunogenic, as well as a potential route to the spread of antibiotic "
        "resistance genes.",
        "Phage numbers rose and fell with the seasons.",
    ]
    assert mended[0].citations == ["A"] and mended[0].quote == "q"
    # "of the viral ecosystems" follows a finished sentence: a continuation with nothing to join
    assert dropped == 1 and mended[1].citations == ["B"]
    assert mend_fragments([Claim(text="of the virus", citations=["A"])]) == ([], 1)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("its potential to", True),
        ("the spread of resistance genes", True),
        ("mRNA vaccines raised antibody titres fourfold.", False),
        ("ACE2 is the receptor for SARS-CoV-2 spike protein.", False),
    ],
)
def test_what_counts_as_a_fragment(text: str, fragment: bool) -> None:
    assert is_fragment(text) is fragment


def test_tidy_drops_the_papers_own_references_only() -> None:
    assert tidy("IL-6 rose (Smith et al., 2019; Lee, 2020) in patients .") == "IL-6 rose in patients."
    assert tidy("Mortality was 12% (95% CI 8-16) in 2020.") == "Mortality was 12% (95% CI 8-16) in 2020."


def test_drop_repeats_keeps_the_fullest_statement_and_every_distinct_number() -> None:
    short = Claim(text="The E1-A226V mutation was present in La Reunion Island.", citations=["A"])
    full = Claim(
        text="The E1-A226V mutation was present in La Reunion Island, and Ae. albopictus vectored "
        "the epidemic infecting 34% of La Reunion Island's population.",
        citations=["A"],
    )
    again = Claim(
        text="The E1-A226V mutation was present in La Reunion Island, and Ae. albopictus vectored "
        "the epidemic infecting 34% of La Reunion's population.",
        citations=["B"],
    )
    assert [c.text for c in drop_repeats([short, full, again])] == [full.text]
    # a different number is a different fact, even when its digits occur in the other claim
    ranged = Claim(text="The mean delay was 5.8 days (95% CI: 4.3-7.5).", citations=["A"])
    other = Claim(text="The mean delay was 3.7 days.", citations=["A"])
    assert drop_repeats([ranged, other]) == [ranged, other]
    il4 = Claim(text="IL-4 and IL-5 are type 2 cytokines.", citations=["A"])
    il25 = Claim(text="IL-25 and IL-33 are type 2 cytokines.", citations=["A"])
    assert drop_repeats([il4, il25]) == [il4, il25]
