"""Model-free claim decomposition: where a drafted claim is cut, and where it is left whole."""

import pytest

from agent.core.claims import atomic_parts, best_quote, dedupe, looks_compound, split_claim
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
