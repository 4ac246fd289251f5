"""The faithfulness verdict reads the sentences nearest a statement, not the whole passage."""

from __future__ import annotations

import pytest

from agent.bench.ragas import statement_support
from agent.core.words import WINDOWS_JUDGED
from agent.llm.testing import FunctionLLM, Request

FILLER = [f"Sentence {n} reports an unrelated measurement of ward occupancy in spring." for n in range(8)]
FACT = "The Sphere Handbook is the foremost authority on minimum standards for humanitarian assistance."
PASSAGE = " ".join([*FILLER[:5], FACT, *FILLER[5:]])


def _judge() -> FunctionLLM:
    # Yes only when the fact is in a short premise: the long-passage failure the windows avoid.
    def score(request: Request) -> float:
        passage = request.messages[-1].content.split("</passage>")[0]
        return 0.95 if FACT in passage and len(passage) < 600 else 0.2

    return FunctionLLM(lambda r: "No", score_function=score)


@pytest.mark.asyncio
async def test_windows_find_support_the_whole_passage_hides() -> None:
    judge = _judge()
    assert await statement_support(judge, PASSAGE, FACT, windows=False) == pytest.approx(0.2)
    assert await statement_support(judge, PASSAGE, FACT) == pytest.approx(0.95)
    # the whole passage once, then one call per window, each fenced as untrusted data
    assert len(judge.requests) == 1 + WINDOWS_JUDGED
    assert all("<passage>" in r.messages[-1].content for r in judge.requests)


@pytest.mark.asyncio
async def test_a_statement_no_window_holds_is_not_supported() -> None:
    judge = _judge()
    claim = "Ward occupancy fell by half in spring."
    assert await statement_support(judge, PASSAGE, claim) == pytest.approx(0.2)
