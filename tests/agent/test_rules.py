"""Each rule of the rulebook on a hand-built run state, without the loop, a library or a model."""

from __future__ import annotations

import pytest

from agent.core.settings import Settings
from agent.core.state import (
    CitationCheck,
    Claim,
    Evidence,
    GateResult,
    RunState,
    Verdict,
    VerificationReport,
)
from agent.policy import Action
from agent.rules import Refusal, Rulebook, reformulate
from tools.base import ToolContext
from tools.verify_citations import DESCRIBES_SOURCE, RESTATES_QUESTION

Q = "Which inhibitor remains active against EGFR T790M tumours?"
ANSWER = Action("generate_answer")


def make_ctx(settings: Settings, **state: object) -> ToolContext:
    return ToolContext(state=RunState(question=Q, **state), settings=settings, llms={})  # type: ignore[arg-type]


def evidence(key: str, score: int = 8) -> Evidence:
    return Evidence(key=key, chunk_id=key, doc_id=key, paper_key=key, text=f"{key} text", score=score)


def failed_gate() -> GateResult:
    return GateResult(passed=False, pieces=0, papers=0, reason="no passage scored ≥ 5")


def dropped(
    text: str = "Aspirin cures lung cancer.", verdict: Verdict = Verdict.fabricated
) -> VerificationReport:
    """A citation check that removed the draft's one claim: regenerate, else search again."""
    claim = Claim(text=text, citations=["Nowhere2020 p. 1"], verdict=verdict)
    return VerificationReport(removed_claims=[claim], needs_regeneration=True, needs_more_evidence=True)


@pytest.fixture
def rules() -> Rulebook:
    return Rulebook(max_requery_rounds=2, max_regenerate_rounds=1)


def test_an_unverified_draft_is_always_verified_first(settings: Settings, rules: Rulebook) -> None:
    ctx = make_ctx(settings, claims=[Claim(text="Osimertinib.", citations=["Egfr2017 p. 1"])])
    ctx.state.progress.answered = True
    forced = rules.forced(ctx)
    assert forced is not None and forced.tool == "verify_citations"
    assert not rules.finished(ctx)
    rules.after(ctx, forced)
    assert ctx.state.progress.verified and rules.forced(ctx) is None and rules.finished(ctx)


def test_an_answer_without_claims_has_nothing_to_verify(settings: Settings, rules: Rulebook) -> None:
    ctx = make_ctx(settings, gate=failed_gate(), queries_tried=[Q, "t790m", "egfr"])
    ctx.state.progress.answered = True
    ctx.state.progress.requeries = rules.max_requery_rounds
    assert rules.forced(ctx) is None and rules.finished(ctx)


def test_a_failed_citation_check_regenerates_within_its_bound(settings: Settings, rules: Rulebook) -> None:
    ctx = make_ctx(settings, report=dropped(), queries_tried=[Q])
    ctx.state.progress.answered = ctx.state.progress.verified = True
    forced = rules.forced(ctx)
    assert forced is not None and forced.tool == "generate_answer"
    assert forced.arguments == {"feedback": "- fabricated: Aspirin cures lung cancer."}
    rules.begin(ctx, forced)
    assert ctx.state.progress.regenerations == 1
    assert rules.forced(ctx) is None  # max_regenerate_rounds = 1: spent, even if the draft failed


def test_a_claim_no_passage_supports_sends_the_run_to_search_not_to_a_rewrite(
    settings: Settings, rules: Rulebook
) -> None:
    ctx = make_ctx(settings, report=dropped(verdict=Verdict.unsupported), queries_tried=[Q])
    ctx.state.progress.answered = ctx.state.progress.verified = True
    assert rules.forced(ctx) is None
    requery = rules.check(ctx, None)
    assert requery is not None and requery.tool == "paper_search"
    # the rewrite is still there for whoever sets agent.rewrite_unsupported
    rewriting = Rulebook.from_settings(settings.with_overrides(agent={"rewrite_unsupported": True}))
    forced = rewriting.forced(ctx)
    assert forced is not None and forced.tool == "generate_answer"


def test_a_claim_describing_its_passage_sends_the_run_to_search(settings: Settings, rules: Rulebook) -> None:
    report = dropped("The passage discusses EGFR inhibitors.", Verdict.unsupported)
    report.removed_claims[0].checks = [
        CitationCheck(key="Nowhere2020 p. 1", verdict=Verdict.unsupported, method=DESCRIBES_SOURCE)
    ]
    ctx = make_ctx(settings, report=report, queries_tried=[Q])
    ctx.state.progress.answered = ctx.state.progress.verified = True
    assert rules.forced(ctx) is None  # a rewrite wrote the same kind of claim again
    requery = rules.check(ctx, None)
    assert requery is not None and requery.tool == "paper_search"
    # rewritten for a fabricated key, the draft is also told what was wrong with this claim
    report.removed_claims.append(Claim(text="Aspirin cures lung cancer.", verdict=Verdict.fabricated))
    report.removed_claims[-1].citations = ["Nowhere2020 p. 1"]
    forced = rules.forced(ctx)
    assert forced is not None and forced.tool == "generate_answer"
    assert forced.arguments == {
        "feedback": "- says what the passage is about, not what it found; state the finding itself: "
        "The passage discusses EGFR inhibitors.\n- fabricated: Aspirin cures lung cancer."
    }


def test_a_multiple_choice_pick_is_not_regenerated(settings: Settings, rules: Rulebook) -> None:
    ctx = make_ctx(settings, report=dropped(), options=["Osimertinib", "Aspirin"])
    ctx.state.progress.answered = ctx.state.progress.verified = True
    assert rules.forced(ctx) is None


def test_an_answer_while_the_gate_failed_becomes_a_new_search(settings: Settings, rules: Rulebook) -> None:
    ctx = make_ctx(settings, gate=failed_gate(), queries_tried=[Q])
    rewritten = rules.check(ctx, ANSWER)
    assert isinstance(rewritten, Action) and rewritten.tool == "paper_search"
    assert rewritten.reason == "evidence gate failed: new terms"
    assert (
        rewritten.arguments["query"] not in ctx.state.queries_tried
        and "t790m" in rewritten.arguments["query"]
    )
    assert not rules.finished(ctx)


def test_a_stale_gate_does_not_search_again(settings: Settings, rules: Rulebook) -> None:
    """The gate belongs to the papers read before the last search: read the new ones first."""
    ctx = make_ctx(settings, gate=failed_gate(), queries_tried=[Q, "t790m"])
    ctx.state.progress.searched_since_gather = True
    assert rules.requery(ctx) is None
    gather = Action("gather_evidence", {"question": Q})
    assert rules.check(ctx, gather) is gather


def test_stopping_after_every_claim_failed_becomes_a_new_search(settings: Settings, rules: Rulebook) -> None:
    ctx = make_ctx(settings, report=dropped(), queries_tried=[Q])
    ctx.state.progress.answered = ctx.state.progress.verified = True
    ctx.state.progress.regenerations = rules.max_regenerate_rounds
    again = rules.check(ctx, None)
    assert isinstance(again, Action) and again.tool == "paper_search"
    assert again.reason == "claims failed: search again"


def test_re_query_rounds_are_bounded(settings: Settings, rules: Rulebook) -> None:
    ctx = make_ctx(settings, gate=failed_gate(), queries_tried=[Q])
    for _ in range(rules.max_requery_rounds):
        search = rules.check(ctx, ANSWER)
        assert isinstance(search, Action) and search.tool == "paper_search"
        rules.begin(ctx, search)
        ctx.state.queries_tried.append(search.arguments["query"])
        rules.after(ctx, search)
        rules.after(ctx, Action("gather_evidence"))  # the gate fails again
    assert ctx.state.progress.requeries == rules.max_requery_rounds
    assert rules.check(ctx, ANSWER) is ANSWER  # rounds spent: the answer step says "insufficient"


def test_every_re_query_resets_the_answer_the_same_way(settings: Settings, rules: Rulebook) -> None:
    """The rule's own search and one the policy chose clear the same things."""
    for search in (None, Action("paper_search", {"query": "osimertinib resistance"})):
        ctx = make_ctx(settings, report=dropped(), queries_tried=[Q], claims=[Claim(text="x")])
        progress = ctx.state.progress
        progress.answered = progress.verified = True
        progress.regenerations = rules.max_regenerate_rounds
        action = rules.check(ctx, search)
        assert isinstance(action, Action) and action.tool == "paper_search"
        rules.begin(ctx, action)
        assert (progress.requeries, progress.answered, progress.verified) == (1, False, False)
        assert ctx.state.report is None and rules.forced(ctx) is None  # the old draft is not re-verified


def test_the_first_search_is_not_a_re_query(settings: Settings, rules: Rulebook) -> None:
    ctx = make_ctx(settings)
    rules.begin(ctx, Action("paper_search", {"query": Q}))
    assert ctx.state.progress.requeries == 0


def test_a_re_search_that_changes_no_offered_passage_ends_the_run(
    settings: Settings, rules: Rulebook
) -> None:
    ctx = make_ctx(settings, evidence={"A": evidence("A")}, queries_tried=[Q])
    rules.after(ctx, ANSWER)  # the answer step was offered passage A
    assert ctx.state.progress.answered_from == {"A"}
    rules.begin(ctx, Action("paper_search", {"query": "t790m"}))
    ctx.state.queries_tried.append("t790m")
    rules.after(ctx, Action("paper_search"))
    assert rules.check(ctx, ANSWER) is ANSWER  # not read yet: no verdict on the new papers
    rules.after(ctx, Action("gather_evidence"))
    assert rules.check(ctx, ANSWER) is None and rules.finished(ctx)
    ctx.state.evidence["B"] = evidence("B", score=9)  # the re-search found a better passage
    assert rules.check(ctx, ANSWER) is ANSWER and not rules.finished(ctx)


def test_a_repeated_query_is_refused(settings: Settings, rules: Rulebook) -> None:
    ctx = make_ctx(settings, queries_tried=[Q])
    repeat = Action("paper_search", {"query": Q})
    refusal = rules.check(ctx, repeat)
    assert isinstance(refusal, Refusal) and refusal.action is repeat
    assert "already tried" in refusal.message
    fresh = Action("paper_search", {"query": "osimertinib"})
    assert rules.check(ctx, fresh) is fresh


def test_asking_the_rules_changes_nothing(settings: Settings, rules: Rulebook) -> None:
    ctx = make_ctx(
        settings, report=dropped(), gate=failed_gate(), queries_tried=[Q], claims=[Claim(text="x")]
    )
    ctx.state.progress.answered = ctx.state.progress.verified = True
    before = ctx.state.model_dump()
    assert rules.forced(ctx) is not None and not rules.finished(ctx)
    assert rules.requery(ctx) is not None and rules.check(ctx, ANSWER) == rules.check(ctx, None)
    assert ctx.state.model_dump() == before


def test_reformulate_never_repeats_a_query(settings: Settings) -> None:
    ctx = make_ctx(settings)
    tried = [Q]
    while (query := reformulate(Q, tried, ctx)) is not None:
        assert query not in tried
        tried.append(query)
    assert len(tried) > 2
    assert reformulate("which of the", [], ctx) is None  # only stop words: no terms to search


def test_limits_come_from_the_settings(settings: Settings) -> None:
    capped = settings.with_overrides(agent={"max_requery_rounds": 0, "max_regenerate_rounds": 3})
    assert Rulebook.from_settings(capped) == Rulebook(
        max_requery_rounds=0, max_regenerate_rounds=3, rewrite_unsupported=False
    )


def test_rewrite_feedback_names_a_claim_that_only_restates_the_question() -> None:
    from agent.rules import _problem

    claim = Claim(text="Some alphavirus vectors have been developed.", verdict=Verdict.unsupported)
    claim.checks = [CitationCheck(key="Tan2020", verdict=Verdict.unsupported, method=RESTATES_QUESTION)]
    assert _problem(claim) == (
        "- only repeats the question's words; state what the passage answers: "
        "Some alphavirus vectors have been developed."
    )
