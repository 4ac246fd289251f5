import json
import sys
from collections.abc import Callable

import pytest

from agent.core.evidence import offered_evidence, quote_in
from agent.core.prompts import REDACTED
from agent.core.settings import Settings, load_settings
from agent.core.state import INSUFFICIENT, Claim, Evidence, Verdict
from agent.llm.testing import FunctionLLM, Request, ScriptedLLM
from corpus.store import Library
from tests.tools.conftest import keyword_summary, make_ctx
from tools.base import ToolContext, ToolRetry, tool
from tools.gather_evidence import gather_evidence
from tools.generate_answer import generate_answer, polarity_options
from tools.verify_citations import (
    DESCRIBES_SOURCE,
    RESTATES_QUESTION,
    describes_source,
    restates_question,
    verify_citations,
    verify_claims,
)


def key_of(ctx, word: str) -> str:  # type: ignore[no-untyped-def]
    return next(k for k, e in ctx.state.evidence.items() if word in e.text)


async def test_gather_stores_original_text_under_stable_keys_and_gates(
    library: Library, settings: Settings
) -> None:
    ctx = make_ctx(library, settings)
    observation = await gather_evidence(ctx, question="EGFR T790M resistance to TKIs")
    assert "PASSED" in observation
    egfr = key_of(ctx, "T790M")
    assert egfr == "Egfr2017"  # a Markdown file has no pages to cite
    ev = ctx.state.evidence[egfr]
    assert ev.score == 9 and "Osimertinib remains active" in ev.text  # original chunk text, not a summary
    assert ev.quote and quote_in(ev.quote, ev.text)
    assert ctx.state.gate and ctx.state.gate.passed
    assert {u.role for u in ctx.state.usage} == {"summary"}


async def test_each_chunk_is_read_once_per_run(library: Library, settings: Settings) -> None:
    asked: list[str] = []

    def summary(req: Request) -> object:
        asked.append(req.messages[-1].content)
        return keyword_summary(req)

    one = settings.with_overrides(evidence__summarize_k=1)
    ctx = make_ctx(library, one, summary=FunctionLLM(summary))
    await gather_evidence(ctx, question="EGFR T790M osimertinib")
    first = {e.chunk_id for e in ctx.state.evidence.values()}
    assert len(asked) == 1 and len(first) == 1
    # the same question again reads further down its ranking
    await gather_evidence(ctx, question="EGFR T790M osimertinib")
    assert len(asked) == 2 and len(ctx.state.evidence) == 2
    # a re-query whose best chunk was read already reads nothing
    await gather_evidence(ctx, question="EGFR T790M osimertinib (t790m osimertinib)")
    assert len(asked) == 2 and {e.chunk_id for e in ctx.state.evidence.values()} >= first


async def test_gate_fails_with_a_reason(library: Library, settings: Settings) -> None:
    strict = settings.model_copy(update={"evidence": settings.evidence.model_copy(update={"min_papers": 3})})
    ctx = make_ctx(library, strict)
    observation = await gather_evidence(ctx, question="EGFR T790M resistance")
    assert "FAILED" in observation and "from 3 paper(s)" in observation
    assert ctx.state.gate is not None and not ctx.state.gate.passed
    await generate_answer(ctx)
    assert ctx.state.claims == [] and ctx.state.summary.startswith("Insufficient evidence")


async def test_malformed_summary_is_retried_once_then_scored_zero(
    library: Library, settings: Settings
) -> None:
    calls: list[str] = []

    def flaky(req: Request) -> object:
        passage = req.messages[-1].content.split("<passage>")[1]
        calls.append(passage)
        if "T790M" in passage and sum("T790M" in c for c in calls) == 1:
            return "not json at all"  # first try for the EGFR chunk fails, the retry works
        if "TP53 encodes" in passage:
            return "still not json"
        return keyword_summary(req)

    ctx = make_ctx(library, settings, summary=FunctionLLM(flaky))
    await gather_evidence(ctx, question="T790M TP53 resistance")
    assert ctx.state.evidence[key_of(ctx, "T790M")].score == 9
    tp53 = ctx.state.evidence[key_of(ctx, "TP53 encodes")]
    assert tp53.score == 0 and tp53.error and "failed twice" in tp53.error


async def test_invented_quote_is_not_kept(library: Library, settings: Settings) -> None:
    liar = FunctionLLM(
        lambda r: {"summary": "s", "score": 8, "quote": "A sentence that appears in no passage at all."}
    )
    ctx = make_ctx(library, settings, summary=liar)
    await gather_evidence(ctx, question="T790M")
    assert all(e.quote == "" for e in ctx.state.evidence.values())


async def test_worked_example_three_sources(library: Library, settings: Settings) -> None:
    """T790M claim cited to TP53 is flagged; a never-retrieved source is fabricated and removed;
    the supported EGFR/TKI claim passes."""
    ctx = make_ctx(library, settings)
    await gather_evidence(ctx, question="EGFR T790M TP53 resistance")
    egfr, tp53 = key_of(ctx, "T790M"), key_of(ctx, "TP53 encodes")
    draft = {
        "claims": [
            {"text": "The T790M mutation confers resistance to gefitinib.", "citations": [tp53], "quote": ""},
            {"text": "Kinase resistance was settled in 2023.", "citations": ["Smith2023"], "quote": ""},
            {
                "text": "Osimertinib remains active against tumours carrying T790M.",
                "citations": [egfr],
                "quote": "Osimertinib remains active against tumours carrying T790M.",
            },
        ],
        "summary": "T790M drives resistance; osimertinib works.",
        "limitations": "No survival data.",
    }
    answer = ScriptedLLM([draft])
    ctx.llms["answer"] = answer
    await generate_answer(ctx)
    schema = answer.requests[0].json_schema
    assert schema is not None
    offered = schema["properties"]["claims"]["items"]["properties"]["citations"]["items"]["enum"]
    assert set(offered) <= set(ctx.state.evidence) and "Smith2023" not in offered
    observation = await verify_citations(ctx)
    report = ctx.state.report
    assert report is not None
    verdicts = {c.text.split()[1]: c.verdict for c in report.claims}
    assert verdicts["T790M"] == Verdict.misattributed
    assert report.claims[0].checks[0].suggested_key == egfr
    assert verdicts["resistance"] == Verdict.fabricated
    assert verdicts["remains"] == Verdict.supported
    assert report.claims[2].checks[0].method == "quote"  # verbatim quote: no judge call needed
    assert report.counts["fabricated_citations"] == 1
    final_keys = {k for c in ctx.state.claims for k in c.citations}
    assert final_keys == {egfr} and final_keys <= set(ctx.state.evidence)
    assert [c.text[:10] for c in report.removed_claims] == ["Kinase res"]
    assert report.repaired == 1 and report.needs_regeneration
    assert report.citation_precision == pytest.approx(1 / 3)
    assert report.faithfulness == pytest.approx(2 / 3)
    assert "1 fabricated citation" in observation


async def test_unsupported_and_contradicted_claims_are_removed(library: Library, settings: Settings) -> None:
    def judge(req: Request) -> float:
        if "contradict" in req.messages[-1].content.split("Claim:")[-1].lower():
            return 0.9 if "increases" in req.messages[-1].content else 0.1
        return 0.1

    ctx = make_ctx(library, settings, judge=FunctionLLM(lambda r: "No", score_function=judge))
    await gather_evidence(ctx, question="EGFR T790M")
    egfr = key_of(ctx, "T790M")
    ctx.state.claims = [
        Claim(text="EGFR inhibitors cure all lung cancers.", citations=[egfr]),
        Claim(text="T790M increases sensitivity to gefitinib.", citations=[egfr]),
    ]
    await verify_citations(ctx)
    report = ctx.state.report
    assert report is not None
    assert [c.verdict for c in report.claims] == [Verdict.unsupported, Verdict.contradicted]
    assert ctx.state.claims == [] and report.needs_more_evidence


async def test_uncited_claim_gets_the_right_key(library: Library, settings: Settings) -> None:
    ctx = make_ctx(library, settings, question="What does TP53 trigger after DNA damage?")
    await gather_evidence(ctx, question="TP53 apoptosis")
    ctx.state.claims = [Claim(text="TP53 triggers apoptosis after DNA damage.", citations=[])]
    await verify_citations(ctx)
    assert ctx.state.report and ctx.state.report.claims[0].verdict == Verdict.uncited
    assert ctx.state.claims[0].citations == [key_of(ctx, "TP53 encodes")]


async def test_injected_instructions_do_not_change_what_is_cited(
    library: Library, settings: Settings
) -> None:
    seen: list[str] = []

    def obedient_if_fooled(req: Request) -> object:
        seen.append(req.messages[-1].content)
        # a compromised model that follows the injected text
        return {
            "claims": [{"text": "Kinase resistance is broad.", "citations": ["Smith2023"], "quote": ""}],
            "summary": "",
            "limitations": "",
        }

    def rates_injection_high(req: Request) -> object:
        out = keyword_summary(req)
        if "Kinase resistance is a broad topic" in req.messages[-1].content:  # the injected passage
            out["score"] = 7
        return out

    ctx = make_ctx(
        library, settings, answer=FunctionLLM(obedient_if_fooled), summary=FunctionLLM(rates_injection_high)
    )
    await gather_evidence(ctx, question="kinase resistance notes")
    assert any("IGNORE PREVIOUS" in e.text for e in ctx.state.evidence.values())
    await generate_answer(ctx)
    await verify_citations(ctx)
    # the injected orders reached the model only as the redaction's marker, inside a passage fence
    # with its closing tag defused (tests/tools/test_injection.py checks the fence on its own)
    prompt = seen[0]
    assert "IGNORE PREVIOUS" not in prompt and "Smith2023" not in prompt
    injected_at = prompt.index(REDACTED)
    assert prompt.rfind("<passage>", 0, injected_at) > prompt.rfind("</passage>", 0, injected_at)
    assert prompt.count("</passage>") == prompt.count("<passage>")
    assert all(k in ctx.state.evidence for c in ctx.state.claims for k in c.citations)
    assert "Smith2023" not in json.dumps([c.model_dump() for c in ctx.state.claims])


OPTIONS = ["Osimertinib", "Gefitinib", "Aspirin", INSUFFICIENT]
QUESTION = "Which inhibitor remains active against tumours carrying EGFR T790M?"


def mc_mode(settings: Settings, mode: str) -> Settings:
    return settings.model_copy(update={"answer": settings.answer.model_copy(update={"mc_mode": mode})})


async def test_multiple_choice_pick_is_verified(library: Library, settings: Settings) -> None:
    ctx = make_ctx(library, mc_mode(settings, "pick"), question=QUESTION, options=OPTIONS)
    await gather_evidence(ctx, question=QUESTION)
    egfr = key_of(ctx, "T790M")
    ctx.llms["answer"] = ScriptedLLM([{"choice": "A", "citations": [egfr], "quote": ""}])
    await generate_answer(ctx)
    assert ctx.state.choice == "A"
    await verify_citations(ctx)
    assert ctx.state.choice == "A" and ctx.state.claims[0].verdict == Verdict.supported


async def test_multiple_choice_unsupported_pick_becomes_insufficient(
    library: Library, settings: Settings
) -> None:
    ctx = make_ctx(
        library,
        mc_mode(settings, "pick"),
        question=QUESTION,
        options=OPTIONS,
        judge=FunctionLLM(lambda r: "No", score_function=lambda r: 0.1),
    )
    await gather_evidence(ctx, question=QUESTION)
    ctx.llms["answer"] = ScriptedLLM([{"choice": "C", "citations": [key_of(ctx, "T790M")], "quote": ""}])
    await generate_answer(ctx)
    await verify_citations(ctx)
    assert ctx.state.choice == "D"  # the "Insufficient information" option


async def test_multiple_choice_pick_cited_to_the_wrong_passage_is_not_reattributed(
    library: Library, settings: Settings
) -> None:
    """The pick must be supported by the passage it cites; another passage "supporting" it
    does not rescue it (free claims are re-attributed, picks are not)."""
    ctx = make_ctx(library, mc_mode(settings, "pick"), question=QUESTION, options=OPTIONS)
    await gather_evidence(ctx, question=QUESTION)
    ctx.llms["answer"] = ScriptedLLM(
        [{"choice": "A", "citations": [key_of(ctx, "TP53 encodes")], "quote": ""}]
    )
    await generate_answer(ctx)
    await verify_citations(ctx)
    assert ctx.state.choice == "D" and ctx.state.report is not None
    assert ctx.state.report.repaired == 0


def judge_of(score: Callable[[str, str], float]) -> FunctionLLM:
    """A judge whose P(Yes) is ``score(claim, passage)``."""

    def p_yes(req: Request) -> float:
        content = req.messages[-1].content
        return score(content.split("Claim:")[1], content.split("<passage>")[1].split("</passage>")[0])

    return FunctionLLM(lambda r: "No", score_function=p_yes)


async def test_multiple_choice_judge_mode_scores_every_option(library: Library, settings: Settings) -> None:
    ctx = make_ctx(
        library,
        mc_mode(settings, "judge"),
        question=QUESTION,
        options=OPTIONS,
        judge=judge_of(lambda c, p: 0.9 if "Osimertinib" in c and "Osimertinib remains active" in p else 0.2),
    )
    await gather_evidence(ctx, question=QUESTION)
    await generate_answer(ctx)
    assert ctx.state.choice == "A"
    assert {u.role for u in ctx.state.usage} == {"summary", "judge"}  # no answer-model call
    await verify_citations(ctx)  # the option is verified against the passage it came from
    claim = ctx.state.claims[0]
    assert ctx.state.choice == "A" and claim.verdict == Verdict.supported
    assert claim.citations == [key_of(ctx, "T790M")]


async def test_judge_mode_abstains_when_two_options_are_equally_supported(
    library: Library, settings: Settings
) -> None:
    """The keyword judge finds both Osimertinib and Gefitinib in the EGFR passage: no clear lead."""
    ctx = make_ctx(library, mc_mode(settings, "judge"), question=QUESTION, options=OPTIONS)
    await gather_evidence(ctx, question=QUESTION)
    observation = await generate_answer(ctx)
    assert ctx.state.choice == "D" and ctx.state.claims == []
    assert "runner-up 0.92" in observation


def test_the_default_preset_scores_options_with_the_judge() -> None:
    assert load_settings(environ={}).answer.mc_mode == "hybrid"


async def hybrid_ctx(
    library: Library, settings: Settings, judge: Callable[[str, str], float], pick: str
) -> ToolContext:
    """Hybrid mode on the EGFR question, evidence gathered; the answer model will pick ``pick``."""
    ctx = make_ctx(
        library,
        mc_mode(settings, "hybrid"),
        question=QUESTION,
        options=OPTIONS,
        judge=judge_of(judge),
        answer=ScriptedLLM([{"choice": pick, "citations": [], "quote": ""}]),
    )
    await gather_evidence(ctx, question=QUESTION)
    return ctx


@pytest.mark.parametrize(("pick", "expected"), [("A", "A"), ("B", "D")])
async def test_hybrid_mode_settles_a_small_lead_with_the_answer_models_pick(
    library: Library, settings: Settings, pick: str, expected: str
) -> None:
    """Osimertinib leads Gefitinib by 0.05 (under the 0.1 margin): the pick must agree to answer."""

    def judge(claim: str, passage: str) -> float:
        if "T790M" not in passage:
            return 0.1
        return 0.85 if "Osimertinib" in claim else 0.8 if "Gefitinib" in claim else 0.1

    ctx = await hybrid_ctx(library, settings, judge, pick)
    observation = await generate_answer(ctx)
    assert ctx.state.choice == expected
    assert ("agree" in observation) == (expected == "A")
    # what the decision was made from is kept, so a benchmark can re-grade it under other margins
    record = ctx.state.option_scores
    assert record is not None and record.pick == pick
    t790m = key_of(ctx, "T790M")
    assert record.scores[t790m] == {"A": 0.85, "B": 0.8, "C": 0.1}
    await verify_citations(ctx)
    assert ctx.state.choice == expected


async def test_a_passage_whose_summary_failed_is_still_offered_after_the_scored_ones(
    library: Library, settings: Settings
) -> None:
    def summary(req: Request) -> object:
        passage = req.messages[-1].content
        if "TP53 encodes" in passage:
            return '{"summary": "cut off'  # truncated JSON, as a small model out of tokens writes it
        return keyword_summary(req)

    ctx = make_ctx(library, settings, question=QUESTION, summary=FunctionLLM(summary))
    await gather_evidence(ctx, question=QUESTION)
    offered = offered_evidence(ctx.state, min_score=5, k=5)
    failed = [e for e in ctx.state.evidence.values() if e.error]
    assert len(failed) == 1 and offered[-1].key == failed[0].key
    assert offered[0].key == key_of(ctx, "T790M")


async def test_hybrid_mode_lets_the_answer_model_break_a_yes_no_judges_tie(
    library: Library, settings: Settings
) -> None:
    """An API judge answers Yes or No (P 1 or 0): two options can tie at the top."""

    def judge(claim: str, passage: str) -> float:
        tied = "Osimertinib" in claim or "Gefitinib" in claim
        return 1.0 if "T790M" in passage and tied else 0.0

    ctx = await hybrid_ctx(library, settings, judge, "B")
    await generate_answer(ctx)
    assert ctx.state.choice == "B" and ctx.state.claims[0].citations == [key_of(ctx, "T790M")]


def test_verdict_options_are_recognised() -> None:
    assert polarity_options(["yes", "no", "maybe", INSUFFICIENT])
    assert polarity_options(["Supported", "refuted", INSUFFICIENT])
    assert not polarity_options(["Osimertinib", "no", INSUFFICIENT])
    assert not polarity_options([INSUFFICIENT])


async def test_hybrid_mode_lets_the_answer_model_pick_a_verdict(library: Library, settings: Settings) -> None:
    """The judge leans to Yes for "Answer: yes" and "Answer: no" alike; the pick decides, then is verified."""
    claim = "Does osimertinib remain active against tumours carrying EGFR T790M?"
    ctx = make_ctx(
        library,
        mc_mode(settings, "hybrid"),
        question=claim,
        options=["yes", "no", INSUFFICIENT],
        answer=ScriptedLLM([{"choice": "A", "citations": [], "quote": ""}]),
        judge=FunctionLLM(lambda r: "No", score_function=lambda r: 0.9),
    )
    await gather_evidence(ctx, question=claim)
    observation = await generate_answer(ctx)
    assert observation.startswith("Chose A) yes")
    await verify_citations(ctx)
    assert ctx.state.choice == "A" and ctx.state.claims[0].verdict == Verdict.supported


def test_tool_schema_comes_from_the_docstring() -> None:
    assert gather_evidence.spec.parameters["required"] == ["question"]
    assert "sub-question" in gather_evidence.spec.parameters["properties"]["question"]["description"]
    assert generate_answer.spec.parameters["required"] == []

    with pytest.raises(TypeError, match="'query' is not described"):

        @tool
        async def bad(ctx: object, query: str) -> str:
            """Does something.

            Args:
                other: not the argument.
            """
            return ""


async def test_unknown_arguments_ask_the_model_to_retry(library: Library, settings: Settings) -> None:
    with pytest.raises(ToolRetry, match="no argument"):
        await gather_evidence(make_ctx(library, settings), query="x")
    with pytest.raises(ToolRetry, match="needs argument"):
        await gather_evidence(make_ctx(library, settings))


async def test_a_claim_restating_a_passage_sentence_needs_no_judge_but_a_negated_one_does(
    library: Library, settings: Settings
) -> None:
    calls: list[str] = []

    def judge(req: Request) -> float:
        if "Does the statement answer the question?" in req.messages[-1].content:
            return 0.9
        calls.append(req.messages[-1].content)
        return 0.1  # a judge that misses every support, as the 1.5B one did on a long chunk

    ctx = make_ctx(library, settings, judge=FunctionLLM(lambda r: "No", score_function=judge))
    await gather_evidence(ctx, question="EGFR T790M osimertinib")
    egfr = key_of(ctx, "T790M")
    ctx.state.claims = [
        # the quote is retyped (not in the passage), the claim itself restates a sentence
        Claim(
            text="Osimertinib remains active against tumours with T790M.", citations=[egfr], quote="made up"
        ),
        Claim(text="Osimertinib does not remain active against tumours carrying T790M.", citations=[egfr]),
    ]
    await verify_citations(ctx)
    report = ctx.state.report
    assert report is not None
    kept, negated = report.claims
    assert kept.verdict == Verdict.supported and kept.checks[0].method == "sentence"
    assert negated.verdict != Verdict.supported and negated.checks[0].method == "judge"
    assert all("does not remain" in c for c in calls)  # the judge saw only the negated claim
    assert [c.text for c in ctx.state.claims] == [kept.text]


async def _t790m_ctx_rejecting_judge(library: Library, settings: Settings) -> tuple[ToolContext, list[str]]:
    """The T790M passage gathered, and a judge that rejects every claim and records what it read."""
    judged: list[str] = []

    def judge(req: Request) -> float:
        if "Does the statement answer the question?" in req.messages[-1].content:
            return 0.9
        judged.append(req.messages[-1].content)
        return 0.1

    ctx = make_ctx(library, settings, judge=FunctionLLM(lambda r: "No", score_function=judge))
    await gather_evidence(ctx, question="EGFR T790M gefitinib erlotinib")
    return ctx, judged


async def test_a_claim_that_shuffles_a_sentences_words_goes_to_the_judge(
    library: Library, settings: Settings
) -> None:
    ctx, judged = await _t790m_ctx_rejecting_judge(library, settings)
    key = key_of(ctx, "T790M")
    # every content word of "The T790M mutation confers resistance to gefitinib and erlotinib",
    # in an order that says something else
    salad = "Erlotinib confers the T790M mutation to gefitinib resistance."
    moved = (
        "Resistance to gefitinib and erlotinib is conferred, according to the passage, by the T790M mutation."
    )
    ctx.state.claims = [Claim(text=salad, citations=[key]), Claim(text=moved, citations=[key])]
    await verify_citations(ctx)
    report = ctx.state.report
    assert report is not None
    shuffled, reordered = report.claims
    assert shuffled.checks[0].method == "judge" and shuffled.verdict != Verdict.supported
    assert any("Erlotinib confers the T790M" in c for c in judged)
    assert reordered.checks[0].method == "judge"  # a passive rewrite is the judge's to weigh too


async def test_a_restated_sentence_with_its_fact_swapped_goes_to_the_judge(
    library: Library, settings: Settings
) -> None:
    ctx, judged = await _t790m_ctx_rejecting_judge(library, settings)
    key = key_of(ctx, "T790M")
    ctx.state.claims = [
        # the sentence with its one fact replaced: 80% of its words still match
        Claim(text="The T790M mutation confers resistance to gefitinib and cetuximab.", citations=[key]),
        # a number the sentence does not hold
        Claim(
            text="The T790M mutation confers resistance to gefitinib and erlotinib in 2019.", citations=[key]
        ),
        # a word the sentence left to its neighbours ("EGFR" is elsewhere in the passage)
        Claim(text="The EGFR T790M mutation confers resistance to gefitinib and erlotinib.", citations=[key]),
    ]
    await verify_citations(ctx)
    report = ctx.state.report
    assert report is not None
    swapped, dated, subject = report.claims
    assert swapped.checks[0].method == "judge" and swapped.verdict != Verdict.supported
    assert dated.checks[0].method == "judge" and dated.verdict != Verdict.supported
    assert subject.checks[0].method == "sentence" and subject.verdict == Verdict.supported
    assert any("cetuximab" in c for c in judged) and any("in 2019" in c for c in judged)
    assert not any("EGFR T790M mutation confers" in c for c in judged)


def _long_passage_ctx(
    library: Library,
    settings: Settings,
    options: list[str] | None = None,
    score: Callable[[Request], float] | None = None,
) -> ToolContext:
    """A run holding one long passage whose one sentence supports a paraphrased claim, and a
    judge that finds support only in a short premise (the 1.5B judge's long-chunk failure),
    unless ``score`` scores instead."""
    filler = [f"Sentence {n} reports an unrelated measurement of ward occupancy in spring." for n in range(8)]
    fact = "Osimertinib remains active against tumours carrying the T790M mutation."
    passage = " ".join([*filler[:4], fact, *filler[4:]])

    def judge(req: Request) -> float:
        if "Does the statement answer the question?" in req.messages[-1].content:
            return 0.9
        premise = req.messages[-1].content.split("</passage>")[0]
        return 0.95 if "Osimertinib remains active" in premise and len(premise) < 600 else 0.2

    ctx = make_ctx(
        library, settings, judge=FunctionLLM(lambda r: "No", score_function=score or judge), options=options
    )
    ctx.state.evidence["Long2020"] = Evidence(
        key="Long2020", chunk_id="long:0", doc_id="long", paper_key="Long2020", text=passage, score=8
    )
    ctx.state.claims = [
        Claim(text="Tumours with T790M still respond to osimertinib.", citations=["Long2020"])
    ]
    return ctx


async def test_the_judge_reads_the_sentences_nearest_a_free_form_claim(
    library: Library, settings: Settings
) -> None:
    ctx = _long_passage_ctx(library, settings.with_overrides(answer__judge_view="windows"))
    await verify_citations(ctx)
    assert ctx.state.report is not None
    (claim,) = ctx.state.report.claims
    assert claim.verdict == Verdict.supported and claim.checks[0].method == "judge"
    assert claim.checks[0].p_support == pytest.approx(0.95)
    # the whole chunk alone, and the default (whole chunk and a window), reject it with this judge
    for view in ("whole", "both"):
        other = _long_passage_ctx(library, settings.with_overrides(answer__judge_view=view))
        await verify_citations(other)
        assert other.state.report is not None
        assert other.state.report.claims[0].verdict != Verdict.supported


def _judged_views(
    library: Library, settings: Settings, p_whole: float, p_window: float
) -> tuple[ToolContext, list[str]]:
    """A run whose judge gives ``p_whole`` on a long premise and ``p_window`` on a short one."""
    premises: list[str] = []

    def judge(req: Request) -> float:
        if "Does the statement answer the question?" in req.messages[-1].content:
            return 0.9
        premise = req.messages[-1].content.split("</passage>")[0]
        if "support the claim?" in req.messages[-1].content:
            premises.append(premise)
        return p_window if len(premise) < 600 else p_whole

    return _long_passage_ctx(library, settings, score=judge), premises


async def test_by_default_a_claim_must_pass_on_the_whole_passage_and_on_a_window(
    library: Library, settings: Settings
) -> None:
    assert settings.answer.judge_view == "both"
    # passed on the whole chunk, failed by every window: dropped, at the windows' P
    ctx, premises = _judged_views(library, settings, p_whole=0.9, p_window=0.3)
    report = await verify_claims(ctx, ctx.state.claims)
    (claim,) = report.claims
    assert claim.verdict != Verdict.supported
    assert claim.checks[0].p_support == pytest.approx(0.3)
    assert len([p for p in premises if len(p) < 600]) == 2  # both windows were tried
    # passed both ways: supported, at the lower P; one window suffices
    ctx, premises = _judged_views(library, settings, p_whole=0.9, p_window=0.95)
    report = await verify_claims(ctx, ctx.state.claims)
    assert report.claims[0].verdict == Verdict.supported
    assert report.claims[0].checks[0].p_support == pytest.approx(0.9)
    assert len([p for p in premises if len(p) < 600]) == 1
    # failed on the whole chunk: no window is read
    ctx, premises = _judged_views(library, settings, p_whole=0.3, p_window=0.95)
    report = await verify_claims(ctx, ctx.state.claims)
    assert report.claims[0].verdict != Verdict.supported
    assert not [p for p in premises if len(p) < 600]


async def test_a_passage_short_enough_to_be_its_own_window_is_judged_once(
    library: Library, settings: Settings
) -> None:
    asked: list[str] = []

    def judge(req: Request) -> float:
        if "support the claim?" in req.messages[-1].content:
            asked.append(req.messages[-1].content)
        return 0.9

    ctx = make_ctx(library, settings, judge=FunctionLLM(lambda r: "No", score_function=judge))
    fact = "Osimertinib remains active against tumours carrying the T790M mutation."
    ctx.state.evidence["Short2020"] = Evidence(
        key="Short2020", chunk_id="short:0", doc_id="short", paper_key="Short2020", text=fact, score=8
    )
    claim = Claim(text="Tumours with T790M still respond to osimertinib.", citations=["Short2020"])
    report = await verify_claims(ctx, [claim])
    assert report.claims[0].verdict == Verdict.supported
    assert report.claims[0].checks[0].p_support == pytest.approx(0.9)
    assert len(asked) == 1


async def test_a_multiple_choice_pick_is_judged_on_the_whole_passage(
    library: Library, settings: Settings
) -> None:
    ctx = _long_passage_ctx(library, settings, options=["active", "inactive", INSUFFICIENT])
    report = await verify_claims(ctx, ctx.state.claims)
    assert report.claims[0].verdict != Verdict.supported
    assert report.claims[0].checks[0].p_support == pytest.approx(0.2)


@pytest.mark.parametrize(
    ("claim", "describes"),
    [
        ("The passage discusses examples of attenuated poxvirus vaccine delivery vectors.", True),
        ("The passage provides information about the structure of the coronavirus.", True),
        ("This study highlights the importance of hand washing.", True),
        ("The study provides data on the incidence of MERS.", True),
        ("The authors describe a new method for detecting coronavirus.", True),
        # a finding, however it is introduced
        ("The study found that masks reduced transmission by 40%.", False),
        ("The passage describes that remdesivir inhibits the viral polymerase.", False),
        ("The study presents a 40% reduction in mortality.", False),
        ("The authors reviewed the complete article for important intellectual content.", False),
        ("The goal of the vaccine is to elicit anti-peptide antibodies.", False),
        ("Studies discuss the role of ACE2.", False),
    ],
)
def test_a_claim_about_what_its_passage_discusses_is_recognised(claim: str, describes: bool) -> None:
    assert describes_source(claim) is describes


async def test_a_claim_that_describes_its_passage_is_removed_without_a_judge_call(
    library: Library, settings: Settings
) -> None:
    judged: list[str] = []

    def judge(req: Request) -> float:
        judged.append(req.messages[-1].content)
        return 0.95  # a judge that would pass it: the passage does discuss T790M

    ctx = make_ctx(library, settings, judge=FunctionLLM(lambda r: "No", score_function=judge))
    await gather_evidence(ctx, question="EGFR T790M osimertinib")
    key = key_of(ctx, "T790M")
    meta = "The passage discusses the T790M mutation and osimertinib."
    ctx.state.claims = [Claim(text=meta, citations=[key, "Nowhere2020"])]
    observation = await verify_citations(ctx)
    report = ctx.state.report
    assert report is not None and not judged
    (claim,) = report.claims
    assert claim.verdict == Verdict.unsupported
    assert [(c.key, c.verdict, c.method) for c in claim.checks] == [
        (key, Verdict.unsupported, DESCRIBES_SOURCE),
        ("Nowhere2020", Verdict.fabricated, "unknown-key"),
    ]
    assert ctx.state.claims == [] and report.needs_regeneration and "removed (unsupported)" in observation


@pytest.mark.parametrize(
    ("question", "claim", "restates"),
    [
        # covidqa-dev answers delivered as verified: the question's own words, nothing more
        (
            "What are some alphavirus vectors that have been developed?",
            "Some alphavirus vectors have been developed.",
            True,
        ),
        ("What stimulates the release of hepcidin?", "Hepcidin stimulates the release of hepcidin.", True),
        ("How do tumours resist EGFR inhibitors?", "Tumours resist EGFR inhibitors.", True),
        # an answer adds something: a number, a name, a mechanism
        ("What was the median case age?", "The median case age was 42 years.", False),
        ("What stimulates the release of hepcidin?", "Fe levels stimulate the release of hepcidin.", False),
        ("What is sporulation?", "Sporulation is the formation of dormant spores.", False),
        # a yes/no question is answered in its own words
        ("Does remdesivir reduce mortality?", "Remdesivir reduces mortality.", False),
        ("Is ACE2 the receptor of SARS-CoV-2?", "ACE2 is the receptor of SARS-CoV-2.", False),
    ],
)
def test_a_claim_that_only_restates_its_question_is_recognised(
    question: str, claim: str, restates: bool
) -> None:
    assert restates_question(question, claim) is restates


async def test_a_claim_that_restates_the_question_is_removed_without_a_judge_call(
    library: Library, settings: Settings
) -> None:
    judged: list[str] = []

    def judge(req: Request) -> float:
        judged.append(req.messages[-1].content)
        return 0.95  # the passage does say tumours resist the inhibitors

    question = "How do lung tumours resist EGFR inhibitors?"
    ctx = make_ctx(
        library, settings, question=question, judge=FunctionLLM(lambda r: "No", score_function=judge)
    )
    await gather_evidence(ctx, question="EGFR T790M osimertinib")
    key = key_of(ctx, "T790M")
    judged.clear()
    ctx.state.claims = [Claim(text="Lung tumours resist EGFR inhibitors.", citations=[key])]
    observation = await verify_citations(ctx)
    report = ctx.state.report
    assert report is not None and not judged
    (claim,) = report.claims
    assert claim.verdict == Verdict.unsupported
    assert [(c.key, c.method) for c in claim.checks] == [(key, RESTATES_QUESTION)]
    assert ctx.state.claims == [] and report.needs_more_evidence and "removed (unsupported)" in observation


async def test_verified_claims_that_do_not_answer_the_question_are_withdrawn(
    library: Library, settings: Settings
) -> None:
    asked: list[str] = []

    def judge(req: Request) -> float:
        text = req.messages[-1].content
        if "Does the statement answer the question?" in text:
            asked.append(text)
            return 0.9 if "Osimertinib" in text.split("<passage>")[1] else 0.2
        return 0.95

    gated = settings.model_copy(
        update={"answer": settings.answer.model_copy(update={"answers_threshold": 0.5})}
    )
    for claim, kept in (
        ("Osimertinib remains active against tumours carrying T790M.", True),
        ("TP53 triggers apoptosis after DNA damage.", False),  # true, cited, and beside the point
    ):
        ctx = make_ctx(library, gated, judge=FunctionLLM(lambda r: "No", score_function=judge))
        ctx.state.question = "Which drug stays active against T790M tumours?"
        await gather_evidence(ctx, question="EGFR T790M TP53 osimertinib")
        key = key_of(ctx, "T790M" if kept else "TP53 encodes")
        ctx.state.claims = [Claim(text=claim, citations=[key])]
        observation = await verify_citations(ctx)
        report = ctx.state.report
        assert report is not None and report.claims[0].verdict == Verdict.supported
        assert report.p_answers == (0.9 if kept else 0.2)
        assert "Which drug stays active" in asked[-1]  # the question itself, beside the claims
        if kept:
            assert [c.text for c in ctx.state.claims] == [claim] and not report.needs_more_evidence
        else:
            assert ctx.state.claims == [] and report.needs_more_evidence
            assert ctx.state.summary.startswith("Insufficient evidence") and "withdrawn" in observation
    ungated = settings.model_copy(
        update={"answer": settings.answer.model_copy(update={"answers_threshold": None})}
    )
    ctx = make_ctx(library, ungated, judge=FunctionLLM(lambda r: "No", score_function=judge))
    await gather_evidence(ctx, question="TP53 apoptosis")
    ctx.state.claims = [
        Claim(text="TP53 triggers apoptosis after DNA damage.", citations=[key_of(ctx, "TP53")])
    ]
    calls = len(asked)
    await verify_citations(ctx)
    assert len(asked) == calls and ctx.state.claims  # no threshold: no question asked, nothing withdrawn


async def test_the_gate_needs_a_passage_whose_quote_answers_the_question(
    library: Library, settings: Settings
) -> None:
    """Scored "related" is not enough with ``evidence.answers_threshold``: a free-form run whose
    passages only share the question's topic fails the gate and is never drafted."""
    asked: list[str] = []

    def judge(req: Request) -> float:
        text = req.messages[-1].content
        assert "Does the statement answer the question?" in text  # the only question gathering asks
        asked.append(text)
        return 0.9 if "osimertinib" in text.split("<passage>")[1].lower() else 0.2

    gated = settings.model_copy(  # one passage per read, so each gather reads one paper
        update={"evidence": settings.evidence.model_copy(update={"answers_threshold": 0.5, "summarize_k": 1})}
    )
    answer = FunctionLLM(lambda r: pytest.fail("a run that failed the gate must not be drafted"))
    ctx = make_ctx(library, gated, judge=FunctionLLM(lambda r: "No", score_function=judge), answer=answer)
    ctx.state.question = "Which drug stays active against T790M tumours?"
    observation = await gather_evidence(ctx, question="TP53 apoptosis")  # the search terms, not the question
    assert asked and all("Which drug stays active" in a for a in asked)
    tp53 = ctx.state.evidence[key_of(ctx, "TP53 encodes")]
    assert tp53.score >= 5 and tp53.p_answers == 0.2  # related, and not an answer
    assert ctx.state.gate is not None and not ctx.state.gate.passed
    assert "FAILED" in observation and "answers P=0.20" in observation
    assert "no passage read answers the question" in ctx.state.gate.reason
    await generate_answer(ctx)
    assert ctx.state.claims == [] and ctx.state.summary.startswith("Insufficient evidence")
    # the answering passage, once read, passes it
    observation = await gather_evidence(ctx, question="EGFR T790M osimertinib")
    assert ctx.state.evidence[key_of(ctx, "T790M")].p_answers == 0.9 and "PASSED" in observation


async def test_the_answers_gate_leaves_multiple_choice_and_unset_runs_alone(
    library: Library, settings: Settings
) -> None:
    judge = FunctionLLM(lambda r: "No", score_function=lambda r: pytest.fail("no judge call when gathering"))
    gated = settings.model_copy(
        update={"evidence": settings.evidence.model_copy(update={"answers_threshold": 0.5})}
    )
    ungated = settings.model_copy(
        update={"evidence": settings.evidence.model_copy(update={"answers_threshold": None})}
    )
    for s, options in ((gated, ["osimertinib", "aspirin"]), (ungated, None)):
        ctx = make_ctx(library, s, judge=judge, options=options)
        assert "PASSED" in await gather_evidence(ctx, question="EGFR T790M resistance")
        assert all(e.p_answers is None for e in ctx.state.evidence.values())


async def test_the_coverage_floor_reads_only_chunks_holding_the_questions_terms(
    library: Library, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``evidence.min_coverage`` a free-form run skips chunks without the question's rare
    terms; when no chunk has them the gate fails before any model is called."""
    ctx = make_ctx(
        library,
        settings.model_copy(update={"evidence": settings.evidence.model_copy(update={"min_coverage": 0.6})}),
        question="Which alphavirus vaccines protect macaques?",
    )
    await gather_evidence(ctx, question="EGFR T790M TP53 kinase")
    assert ctx.state.evidence  # three chunks: too few for document frequencies, the floor waits
    monkeypatch.setattr(sys.modules["tools.gather_evidence"], "COVERAGE_MIN_CHUNKS", 1)
    floored = settings.model_copy(
        update={"evidence": settings.evidence.model_copy(update={"min_coverage": 0.6})}
    )
    read: list[str] = []

    def summary(req: Request) -> dict[str, object]:
        read.append(req.messages[-1].content)
        return keyword_summary(req)

    no_model = FunctionLLM(lambda r: pytest.fail("nothing to summarise, so no model call"))
    ctx = make_ctx(library, floored, summary=no_model, question="Which alphavirus vaccines protect macaques?")
    observation = await gather_evidence(ctx, question="alphavirus vaccines macaques")
    assert ctx.state.evidence == {} and ctx.state.gate is not None and not ctx.state.gate.passed
    assert "evidence.min_coverage" in ctx.state.gate.reason and "FAILED" in observation
    await generate_answer(ctx)
    assert ctx.state.claims == [] and ctx.state.summary.startswith("Insufficient evidence")

    # the EGFR chunk holds the question's terms, the TP53 and injection chunks do not: only it is read
    ctx = make_ctx(
        library, floored, summary=FunctionLLM(summary), question="Does osimertinib stay active against T790M?"
    )
    assert "PASSED" in await gather_evidence(ctx, question="osimertinib T790M TP53 kinase")
    assert len(read) == 1 and "Osimertinib remains active" in read[0]
    # multiple choice is judged option by option: the floor leaves it alone
    ctx = make_ctx(
        library, floored, question="Which alphavirus vaccines protect macaques?", options=["a", "b"]
    )
    await gather_evidence(ctx, question="EGFR T790M TP53 kinase")
    assert len(ctx.state.evidence) == 3
