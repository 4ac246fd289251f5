"""A free-form question about "this study" in a library of several papers stops and asks which."""

import sys

import pytest

from agent.core.settings import Settings
from agent.llm.testing import FunctionLLM
from agent.rules import Rulebook
from corpus.store import Library
from tests.tools.conftest import make_ctx
from tools.gather_evidence import gather_evidence
from tools.generate_answer import generate_answer


@pytest.fixture
def gated(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:
    # three chunks are too few for the floor's document frequencies; this test wants the floor on
    monkeypatch.setattr(sys.modules["tools.gather_evidence"], "COVERAGE_MIN_CHUNKS", 1)
    evidence = settings.evidence.model_copy(update={"min_coverage": 0.1, "unnamed_papers": 2})
    return settings.model_copy(update={"evidence": evidence})


async def test_an_ambiguous_reference_stops_before_any_model_call_and_names_the_candidates(
    library: Library, gated: Settings
) -> None:
    question = "Which cancer mutations does this study describe?"  # EGFR's and TP53's chunks both hold them
    no_model = FunctionLLM(lambda r: pytest.fail("the question is ambiguous: nothing is read"))
    ctx = make_ctx(library, gated, summary=no_model, judge=no_model, answer=no_model, question=question)
    observation = await gather_evidence(ctx, question=question)
    gate = ctx.state.gate
    assert gate is not None and not gate.passed and gate.final and gate.papers == 2
    assert "'this study'" in gate.reason and "Name the paper" in gate.reason and "FAILED" in observation
    named = [p for p in library.papers if p.key in gate.reason]
    assert len(named) == 2  # both candidates, by key: a title is paper text and stays out
    assert not any(p.title and p.title in gate.reason for p in library.papers)
    assert ctx.state.evidence == {}
    # no re-search: new terms cannot say which study is meant
    assert Rulebook.from_settings(gated).requery(ctx) is None
    await generate_answer(ctx)
    assert ctx.state.claims == [] and ctx.state.summary.startswith("Insufficient evidence")
    assert "Name the paper" in ctx.state.summary


async def test_one_matching_paper_or_the_rule_off_reads_as_before(library: Library, gated: Settings) -> None:
    # "this study" with terms only the EGFR paper holds: the library can tell which study is meant
    question = "Does osimertinib stay active against T790M in this study?"
    ctx = make_ctx(library, gated, question=question)
    assert "PASSED" in await gather_evidence(ctx, question=question)
    assert ctx.state.gate is not None and not ctx.state.gate.final

    off = gated.model_copy(update={"evidence": gated.evidence.model_copy(update={"unnamed_papers": None})})
    question = "Which cancer mutations does this study describe?"
    ctx = make_ctx(library, off, question=question)
    await gather_evidence(ctx, question=question)
    assert ctx.state.evidence and not (ctx.state.gate and ctx.state.gate.final)
    # multiple choice is judged option by option, as with the floor
    ctx = make_ctx(library, gated, question=question, options=["EGFR", "TP53"])
    await gather_evidence(ctx, question=question)
    assert ctx.state.evidence


async def test_at_one_paper_the_single_candidate_is_named_for_the_user_to_confirm(
    library: Library, gated: Settings
) -> None:
    # the shipped default: even one covered paper is not taken for "this study" unasked
    one = gated.model_copy(update={"evidence": gated.evidence.model_copy(update={"unnamed_papers": 1})})
    question = "Does osimertinib stay active against T790M in this study?"
    no_model = FunctionLLM(lambda r: pytest.fail("stopped before reading"))
    ctx = make_ctx(library, one, summary=no_model, judge=no_model, answer=no_model, question=question)
    assert "FAILED" in await gather_evidence(ctx, question=question)
    gate = ctx.state.gate
    assert gate is not None and gate.final and gate.papers == 1
    assert "1 paper holds its terms" in gate.reason
    (named,) = [p for p in library.papers if p.key in gate.reason]
    assert "osimertinib" in " ".join(c.text for c in library.chunks if c.doc_id == named.doc_id).lower()
