"""Policies choose the next tool; the rules that bind every run live in :mod:`agent.rules`.

A policy only proposes: ``next_action(ctx, observations)`` returns the tool it would call next,
or ``None`` for "done". It changes nothing the rules read (the run's progress, the report);
the loop asks the rulebook first, then the policy, and lets the rulebook check the choice.

* :class:`PipelinePolicy` runs search → gather → answer, in that fixed order; verification,
  regeneration and re-queries come from the rulebook. A 1.5B local model can run this.
* :class:`LLMPolicy` lets the agent model choose tools by tool calling. Native tool use on
  Anthropic and litellm models; on the local model, JSON constrained by a grammar to the tool
  schemas.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from agent.llm.types import Message, ToolCall
from tools.base import Tool, ToolContext

__all__ = ["Action", "LLMPolicy", "PipelinePolicy", "Policy"]


@dataclass
class Action:
    """A tool to call with its arguments; ``reason`` is shown in the run's events."""

    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)
    reason: str = ""


class Policy(Protocol):
    async def next_action(self, ctx: ToolContext, observations: list[tuple[Action, str]]) -> Action | None:
        """The next tool to call, or None when the policy has nothing more to do."""
        ...


class PipelinePolicy:
    """search → gather → (search → gather)* → answer, read off the run's progress.

    Everything conditional (verify every draft, regenerate, search again with new terms, stop
    when a re-search changed nothing) is the rulebook's, so this stays a fixed order.
    """

    async def next_action(self, ctx: ToolContext, observations: list[tuple[Action, str]]) -> Action | None:
        state, progress = ctx.state, ctx.state.progress
        if not state.queries_tried:
            return Action("paper_search", {"query": state.question}, reason="start")
        if progress.searched_since_gather:
            query = state.queries_tried[-1]
            question = state.question if len(state.queries_tried) == 1 else f"{state.question} ({query})"
            return Action("gather_evidence", {"question": question}, reason="read the new papers")
        if not progress.answered:
            return Action("generate_answer", {}, reason="answer from the evidence")
        return None


AGENT_SYSTEM = (
    "You are a research agent answering a scientific question from papers. Use the tools: "
    "paper_search to find papers, gather_evidence to read and score passages, generate_answer to "
    "write the cited answer, verify_citations to check it. Search with new terms when the evidence "
    "gate fails. Call exactly one tool per turn. When the answer is verified, reply with the word DONE."
)


class LLMPolicy:
    """The agent model picks the next tool by tool calling; a reply without a tool call is "done".

    The one thing it writes to the state is the usage of its own model call, as every tool
    does, so the budgets see it.
    """

    def __init__(self, tools: list[Tool]) -> None:
        self.tools = tools

    async def next_action(self, ctx: ToolContext, observations: list[tuple[Action, str]]) -> Action | None:
        state = ctx.state
        messages = [Message.system(AGENT_SYSTEM, cache=True), Message.user(f"Question: {state.question}")]
        for i, (action, observation) in enumerate(observations[-8:]):
            call_id = f"step{i}"
            messages.append(
                Message.assistant("", [ToolCall(id=call_id, name=action.tool, arguments=action.arguments)])
            )
            messages.append(Message.tool(observation[:1500], call_id))
        completion = await ctx.llm("agent").complete(
            messages, role="agent", tools=[t.spec for t in self.tools], max_tokens=200
        )
        state.add_usage(completion.usage)
        if not completion.tool_calls:
            return None
        call = completion.tool_calls[0]
        return Action(call.name, dict(call.arguments), reason="agent model")
