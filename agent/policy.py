"""Policies choose the next tool. The re-query rules are *code* in :class:`Rules`, shared by both.

* :class:`PipelinePolicy` runs search → gather → answer → verify, with the re-query rules.
  A 1.5B local model can run this.
* :class:`LLMPolicy` lets the agent model choose tools by tool calling. Native tool use on
  Anthropic and litellm models; on the local model, JSON constrained by a grammar to the tool
  schemas. The same rules still apply: an answer is always verified, a failed gate blocks
  answering while search rounds are left, and a repeated query is refused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol

from agent.core.evidence import offered_evidence
from agent.core.state import Evidence, RunState
from agent.llm.types import Message, ToolCall
from tools.base import Tool, ToolContext

__all__ = ["Action", "LLMPolicy", "PipelinePolicy", "Policy", "Rules", "reformulate"]


@dataclass
class Action:
    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)
    reason: str = ""


def reformulate(question: str, tried: list[str], ctx: ToolContext) -> str | None:
    """A new search query, different from every one tried, built from the question's rarest terms.

    Rare terms (by the library's BM25 document frequency) are what a failed search most
    likely diluted: gene names, compounds, methods.
    """
    from corpus.search import tokenize

    terms = list(dict.fromkeys(tokenize(question)))
    if not terms:
        return None
    idf: dict[str, float] = {}
    if ctx.searcher is not None:
        bm25 = ctx.searcher.bm25()
        n = bm25.matrix.shape[0]
        df = (bm25.matrix > 0).sum(axis=0).A1 if n else []
        for t in terms:
            col = bm25.vocab.get(t)
            idf[t] = math.log(1 + n / (1 + df[col])) if col is not None else 0.0
    rare = sorted(terms, key=lambda t: -idf.get(t, len(t)))
    candidates = [" ".join(rare[:6]), " ".join(rare[:3]), " ".join(rare[:2]), " ".join(rare[3:9]), rare[0]]
    for query in candidates:
        if query and query not in tried:
            return query
    return None


@dataclass
class Rules:
    """Bounded re-query rounds, counted across the run."""

    max_requery: int
    max_regenerate: int
    requeries: int = 0
    regenerations: int = 0
    searched_since_gather: bool = False
    answered: bool = False
    verified: bool = False
    answered_from: frozenset[str] | None = None  # the evidence keys the last answer was offered
    offering: frozenset[str] | None = None  # the keys of the answer being written

    def after(self, tool: str) -> None:
        if tool == "paper_search":
            self.searched_since_gather = True
        elif tool == "gather_evidence":
            self.searched_since_gather = False
        elif tool == "generate_answer":
            self.answered, self.verified = True, False
            self.answered_from = self.offering
        elif tool == "verify_citations":
            self.verified = True

    def forced(self, state: RunState, ctx: ToolContext) -> Action | None:
        """What the rules require next, whatever the policy would choose."""
        if self.answered and not self.verified and state.claims:
            return Action("verify_citations", reason="every answer is verified")
        report = state.report
        can_regenerate = self.verified and self.regenerations < self.max_regenerate and not state.options
        if can_regenerate and report is not None and report.needs_regeneration and report.removed_claims:
            self.regenerations += 1
            self.answered = False
            feedback = "\n".join(
                f"- {c.verdict.value if c.verdict else ''}: {c.text}" for c in report.removed_claims
            )
            return Action(
                "generate_answer", {"feedback": feedback}, reason="citation check failed: regenerate"
            )
        return None


class Policy(Protocol):
    async def next_action(
        self, ctx: ToolContext, rules: Rules, observations: list[tuple[Action, str]]
    ) -> Action | None: ...


class PipelinePolicy:
    """search → gather → (re-search → gather)* → answer → verify → (regenerate | re-search)*.

    A re-search that leaves the answer step's evidence unchanged ends the run: answering the
    same evidence again would repeat the answer that failed.
    """

    async def next_action(
        self, ctx: ToolContext, rules: Rules, observations: list[tuple[Action, str]]
    ) -> Action | None:
        state = ctx.state
        forced = rules.forced(state, ctx)
        if forced is not None:
            return forced
        if not state.queries_tried:
            return Action("paper_search", {"query": state.question}, reason="start")
        if rules.searched_since_gather:
            query = state.queries_tried[-1]
            question = state.question if len(state.queries_tried) == 1 else f"{state.question} ({query})"
            return Action("gather_evidence", {"question": question}, reason="read the new papers")
        gate_failed = state.gate is not None and not state.gate.passed
        report = state.report
        need_more = gate_failed or (rules.verified and report is not None and report.needs_more_evidence)
        if need_more and rules.requeries < rules.max_requery:
            new_query = reformulate(state.question, state.queries_tried, ctx)
            if new_query is not None:
                rules.requeries += 1
                rules.answered = rules.verified = False
                state.report = None
                return Action(
                    "paper_search",
                    {"query": new_query},
                    reason="evidence gate failed: new terms"
                    if gate_failed
                    else "claims failed: search again",
                )
        if not rules.answered:
            offered = frozenset(e.key for e in _offered(ctx))
            if offered == rules.answered_from:
                # the re-search found nothing the answer step would see: at temperature 0 it would
                # write the answer that just failed again (seen on PubMedQA: three identical rounds)
                return None
            rules.offering = offered
            return Action("generate_answer", {}, reason="answer from the evidence")
        return None


def _offered(ctx: ToolContext) -> list[Evidence]:
    cfg = ctx.settings
    return offered_evidence(ctx.state, min_score=cfg.evidence.min_score, k=cfg.answer.evidence_k)


AGENT_SYSTEM = (
    "You are a research agent answering a scientific question from papers. Use the tools: "
    "paper_search to find papers, gather_evidence to read and score passages, generate_answer to "
    "write the cited answer, verify_citations to check it. Search with new terms when the evidence "
    "gate fails. Call exactly one tool per turn. When the answer is verified, reply with the word DONE."
)


class LLMPolicy:
    """The agent model picks the next tool by tool calling."""

    def __init__(self, tools: list[Tool]) -> None:
        self.tools = tools

    async def next_action(
        self, ctx: ToolContext, rules: Rules, observations: list[tuple[Action, str]]
    ) -> Action | None:
        state = ctx.state
        forced = rules.forced(state, ctx)
        if forced is not None:
            return forced
        if rules.verified and state.report is not None and not state.report.needs_more_evidence:
            return None
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
            return None if rules.verified or not rules.answered else Action("verify_citations")
        call = completion.tool_calls[0]
        action = Action(call.name, dict(call.arguments), reason="agent model")
        gate_failed = state.gate is not None and not state.gate.passed
        if action.tool == "generate_answer" and gate_failed and rules.requeries < rules.max_requery:
            query = reformulate(state.question, state.queries_tried, ctx)
            if query is not None:
                rules.requeries += 1
                return Action(
                    "paper_search", {"query": query}, reason="gate failed: the rules search again first"
                )
        if action.tool == "paper_search":
            rules.requeries += 1 if state.queries_tried else 0
        return action
