"""The agent loop: one run state, a rulebook, a policy choosing tools, and budgets that end the run.

Each turn the rulebook (:mod:`agent.rules`) speaks first: a forced step runs, or a finished
run ends. Otherwise the policy proposes a tool and the rulebook lets it through, rewrites it
or refuses it; the tool runs, and the rulebook records the progress. Each step is a record
(tool, arguments, observation, seconds, error). A tool that fails with a model or tool error
does not end the run: the error becomes the step's observation and the policy decides what
next. Two failures in a row end it. When a budget runs out (steps, model calls, tokens, cost,
wall time), the loop returns the best *verified* answer it has, with status ``truncated`` if
the rulebook says the run still had work to do; it never raises for a budget, and never asks
the policy (a model call under the LLM policy) just to learn that.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from agent.core.errors import ScholarloopError
from agent.core.evidence import insufficient_letter, option_text
from agent.core.state import Answer, Claim, Status, Step, no_answer
from agent.policy import Action, Policy
from agent.render import references, render_text, status_of
from agent.rules import Refusal, Rulebook
from tools.base import Tool, ToolContext, ToolRetry
from tools.gather_evidence import gather_evidence
from tools.generate_answer import generate_answer
from tools.paper_search import paper_search
from tools.verify_citations import direct_answer, verify_citations

__all__ = ["TOOLS", "run_loop"]

TOOLS: list[Tool] = [paper_search, gather_evidence, generate_answer, verify_citations]

EventCallback = Callable[[str, dict[str, Any]], None]


class _Budget:
    def __init__(self, ctx: ToolContext) -> None:
        self.cfg = ctx.settings.agent
        self.ctx = ctx

    def exhausted(self, steps: int) -> str | None:
        state, cfg = self.ctx.state, self.cfg
        if steps >= cfg.max_steps:
            return f"step budget ({cfg.max_steps}) used up"
        if len(state.usage) >= cfg.max_llm_calls:
            return f"model-call budget ({cfg.max_llm_calls}) used up"
        if state.total_tokens >= cfg.max_tokens:
            return f"token budget ({cfg.max_tokens}) used up"
        if state.total_cost >= cfg.max_cost_usd > 0:
            return f"cost budget (${cfg.max_cost_usd:.2f}) used up"
        return None


def _snapshot(ctx: ToolContext) -> tuple[list[Claim], str | None, str]:
    state = ctx.state
    return [c.model_copy(deep=True) for c in state.claims], state.choice, state.summary


async def run_loop(ctx: ToolContext, policy: Policy, *, tools: list[Tool] | None = None) -> Answer:
    """Run until the rulebook or the policy ends the run, a budget runs out, or the run fails."""
    started = time.perf_counter()
    state = ctx.state
    by_name = {t.name: t for t in (tools or TOOLS)}
    rulebook = Rulebook.from_settings(ctx.settings)
    budget = _Budget(ctx)
    observations: list[tuple[Action, str]] = []
    best: tuple[list[Claim], str | None, str] | None = None
    status: Status | None = None
    error: str | None = None
    consecutive_errors = 0

    async def steps() -> None:
        nonlocal best, status, error, consecutive_errors
        while True:
            used_up = budget.exhausted(len(state.steps))
            if used_up is not None:
                if not rulebook.finished(ctx):
                    status, error = Status.truncated, used_up
                return
            decision: Action | Refusal | None = rulebook.forced(ctx)
            if decision is None:
                if rulebook.finished(ctx):
                    return
                decision = rulebook.check(ctx, await policy.next_action(ctx, observations))
            if decision is None:
                return
            action = decision.action if isinstance(decision, Refusal) else decision
            tool = by_name.get(action.tool)
            step = Step(tool=action.tool, arguments=action.arguments)
            ctx.emit("step", tool=action.tool, arguments=action.arguments, reason=action.reason)
            t0 = time.perf_counter()
            try:
                if isinstance(decision, Refusal):  # not run: the policy hears why, as for a ToolRetry
                    raise ToolRetry(decision.message)
                if tool is None:
                    raise ToolRetry(f"there is no tool {action.tool!r}; use one of {sorted(by_name)}")
                rulebook.begin(ctx, action)
                step.observation = await tool(ctx, **action.arguments)
                consecutive_errors = 0
                rulebook.after(ctx, action)
            except ToolRetry as exc:
                step.observation = f"Retry: {exc}"
            except ScholarloopError as exc:
                consecutive_errors += 1
                step.error = f"{type(exc).__name__}: {exc}"
                step.observation = f"The tool failed: {step.error}"
                if consecutive_errors >= 2:
                    status, error = Status.failed, step.error
                    state.steps.append(step)
                    return
            step.seconds = time.perf_counter() - t0
            state.steps.append(step)
            observations.append((action, step.observation))
            ctx.emit("observation", tool=action.tool, observation=step.observation, seconds=step.seconds)
            if action.tool == "verify_citations" and state.report is not None:
                kept = len(state.claims)
                if best is None or kept >= len(best[0]):
                    best = _snapshot(ctx)

    try:
        async with asyncio.timeout(ctx.settings.agent.timeout_s):
            await steps()
    except TimeoutError:
        status, error = Status.truncated, f"wall-clock budget ({ctx.settings.agent.timeout_s:.0f} s) used up"

    # Only verified claims leave the loop: an unverified draft is replaced by the best verified one.
    if not state.progress.verified or (best is not None and len(best[0]) > len(state.claims)):
        if best is not None:
            state.claims, state.choice, state.summary = best
        else:
            if state.options:
                state.choice = insufficient_letter(state.options) if status is not None else state.choice
            elif state.claims:  # a draft the run never checked (no draft: keep the reason given)
                state.summary = no_answer("the run ended before its draft was verified")
            state.claims = []
    final = status or status_of(state)
    if final == Status.failed and best is not None:
        final = Status.truncated
    if ctx.settings.answer.direct_answer and final in {Status.answered, Status.truncated}:
        try:
            state.direct = await direct_answer(ctx)
        except ScholarloopError:  # the claims stand without their one-line lead
            state.direct = ""
    answer = Answer(
        question=state.question,
        status=final,
        answer=render_text(state),
        direct=state.direct,
        choice=state.choice if state.options else None,
        choice_text=option_text(state.options, state.choice) if state.options else None,
        claims=state.claims,
        evidence=sorted(state.evidence.values(), key=lambda e: -e.score),
        references=references(state),
        verification=state.report,
        usage=state.usage_by_role(),
        seconds=time.perf_counter() - started,
        error=error,
        trace=state.steps,
        option_scores=state.option_scores,
    )
    ctx.emit("done", status=answer.status.value)
    return answer
