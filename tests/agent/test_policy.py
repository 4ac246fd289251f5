"""Policies only choose: the pipeline's fixed order, the agent model's tool calls, and when the
loop asks them at all (never once a budget is used up, never when the rules already decided)."""

from __future__ import annotations

from pathlib import Path

from agent.api import Session
from agent.core.settings import Settings
from agent.core.state import RunState, Status
from agent.llm.testing import ScriptedLLM, tool_call
from agent.loop import TOOLS, run_loop
from agent.policy import Action, LLMPolicy, PipelinePolicy, Policy
from tests.agent.conftest import make_session
from tools.base import ToolContext

Q = "Which inhibitor remains active against EGFR T790M tumours?"


def make_ctx(settings: Settings, **llms: object) -> ToolContext:
    return ToolContext(state=RunState(question=Q), settings=settings, llms=llms)  # type: ignore[arg-type]


async def test_pipeline_order_read_off_the_progress(settings: Settings) -> None:
    ctx = make_ctx(settings)
    state, progress, pipeline = ctx.state, ctx.state.progress, PipelinePolicy()

    async def choice() -> tuple[str, dict[str, object]] | None:
        before = state.model_dump()
        action = await pipeline.next_action(ctx, [])
        assert state.model_dump() == before  # choosing changes nothing
        return None if action is None else (action.tool, action.arguments)

    assert await choice() == ("paper_search", {"query": Q})
    state.queries_tried.append(Q)
    progress.searched_since_gather = True
    assert await choice() == ("gather_evidence", {"question": Q})
    progress.searched_since_gather = False
    assert await choice() == ("generate_answer", {})
    progress.answered = True
    assert await choice() is None  # verifying, regenerating and re-searching are the rulebook's
    state.queries_tried.append("t790m")  # a re-search: its papers are read for the question and the terms
    progress.searched_since_gather, progress.answered = True, False
    assert await choice() == ("gather_evidence", {"question": f"{Q} (t790m)"})


async def test_llm_policy_returns_the_models_tool_call(settings: Settings) -> None:
    agent = ScriptedLLM([tool_call("paper_search", query="EGFR T790M"), "DONE"])
    ctx = make_ctx(settings, agent=agent)
    policy = LLMPolicy(TOOLS)
    search = Action("paper_search", {"query": Q})
    action = await policy.next_action(ctx, [(search, "Found 3 paper(s).")])
    assert action is not None and (action.tool, action.arguments) == ("paper_search", {"query": "EGFR T790M"})
    request = agent.requests[0]
    assert {t.name for t in request.tools} == {t.name for t in TOOLS}
    assert request.messages[-1].content == "Found 3 paper(s)."  # what the last tool said
    assert await policy.next_action(ctx, []) is None  # no tool call: the model is done
    assert len(ctx.state.usage) == 2 and ctx.state.usage[0].role == "agent"  # its calls count for budgets
    assert ctx.state.progress == RunState(question=Q).progress  # and it touched no rule state


async def test_llm_policy_is_not_asked_when_a_budget_is_used_up(index_dir: Path, settings: Settings) -> None:
    """Exactly three scripted choices for three steps: a fourth model call would raise."""
    agent = ScriptedLLM(
        [
            tool_call("paper_search", query="EGFR T790M osimertinib"),
            tool_call("gather_evidence", question=Q),
            tool_call("generate_answer"),
        ]
    )
    capped = settings.with_overrides(agent={"policy": "llm", "max_steps": 3})
    answer = await make_session(index_dir, capped, agent=agent).ask(Q)
    assert [s.tool for s in answer.trace] == ["paper_search", "gather_evidence", "generate_answer"]
    assert answer.status == Status.truncated and "step budget" in (answer.error or "")
    assert len(agent.requests) == 3 and agent.remaining == 0


async def test_llm_policy_is_not_asked_once_the_answer_is_verified(
    index_dir: Path, settings: Settings
) -> None:
    agent = ScriptedLLM(
        [
            tool_call("paper_search", query="EGFR T790M osimertinib"),
            tool_call("gather_evidence", question=Q),
            tool_call("generate_answer"),
        ]
    )
    session = make_session(index_dir, settings.with_overrides(agent={"policy": "llm"}), agent=agent)
    answer = await session.ask(Q)
    assert [s.tool for s in answer.trace][-1] == "verify_citations"  # the rulebook's, not the model's
    assert answer.status == Status.answered and len(agent.requests) == 3


async def test_a_repeated_query_is_refused_without_running_the_search(
    index_dir: Path, settings: Settings
) -> None:
    agent = ScriptedLLM(
        [
            tool_call("paper_search", query="EGFR T790M"),
            tool_call("paper_search", query="EGFR T790M"),
            tool_call("gather_evidence", question=Q),
            tool_call("generate_answer"),
        ]
    )
    session = make_session(index_dir, settings.with_overrides(agent={"policy": "llm"}), agent=agent)
    answer = await session.ask(Q)
    refused = answer.trace[1]
    assert refused.tool == "paper_search" and refused.observation.startswith("Retry: the query 'EGFR T790M'")
    assert "Retry:" in agent.requests[2].messages[-1].content  # the model heard why
    assert answer.status == Status.answered


class Counting:
    """Wraps a policy and records the run's step count and budgets each time it is asked."""

    def __init__(self, inner: Policy) -> None:
        self.inner = inner
        self.asked_at: list[tuple[int, int]] = []

    async def next_action(self, ctx: ToolContext, observations: list[tuple[Action, str]]) -> Action | None:
        self.asked_at.append((len(ctx.state.steps), len(ctx.state.usage)))
        return await self.inner.next_action(ctx, observations)


async def run(session: Session, policy: Policy) -> Status:
    ctx = ToolContext(
        state=RunState(question=Q),
        settings=session.settings,
        llms=session.llms,
        searcher=session.searcher,
    )
    return (await run_loop(ctx, policy)).status


async def test_the_policy_is_never_asked_after_a_budget_is_used_up(
    index_dir: Path, settings: Settings
) -> None:
    for agent, used_up_at in (({"max_steps": 2}, (2, None)), ({"max_llm_calls": 3}, (None, 3))):
        session = make_session(index_dir, settings.with_overrides(agent=agent))
        policy = Counting(PipelinePolicy())
        assert await run(session, policy) == Status.truncated
        max_steps, max_calls = used_up_at
        assert policy.asked_at  # it chose until then
        assert all(max_steps is None or steps < max_steps for steps, _ in policy.asked_at)
        assert all(max_calls is None or calls < max_calls for _, calls in policy.asked_at)


async def test_the_policy_is_asked_only_when_the_rules_leave_the_choice_open(
    index_dir: Path, settings: Settings
) -> None:
    policy = Counting(PipelinePolicy())
    assert await run(make_session(index_dir, settings), policy) == Status.answered
    # search, gather, answer: chosen; the verification was forced and the run then finished
    assert [steps for steps, _ in policy.asked_at] == [0, 1, 2]
