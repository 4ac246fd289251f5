"""The loop's rulebook: what a run must do, whatever its policy would choose.

A policy (the fixed pipeline or the agent model) only proposes the next tool. The rules are
plain code, so they hold the same with a 1.5B local model and a frontier model:

* **forced steps**, taken before the policy is asked: an unverified draft is verified; a
  citation check that removed claims a rewrite can fix (a fabricated or missing citation) has
  the draft rewritten with them as feedback, at most ``agent.max_regenerate_rounds`` times;
* **re-query**: while the evidence gate has failed, or the citation check left no claim
  standing, an answer or an end the policy proposes becomes a search with a reformulated
  query, at most ``agent.max_requery_rounds`` times. Every search after the first is a round
  and clears the answer, its verification and the report, whoever chose it;
* **vetoes**: a query already tried is refused (the policy hears why); an answer whose offered
  evidence a re-search left unchanged ends the run instead;
* **finished**: a pure view of whether the rules want anything more. The loop reads it before
  asking the policy and when a budget runs out, so a run is ``truncated`` only when it still
  had work to do, and checking a budget never costs a model call.

The rulebook holds only its limits; where the run stands lives in ``RunState.progress``, which
only the rulebook writes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from agent.core.evidence import offered_evidence
from agent.core.settings import Settings
from agent.core.state import Claim, Verdict, VerificationReport
from agent.policy import Action
from corpus.search import tokenize
from tools.base import ToolContext
from tools.verify_citations import DESCRIBES_SOURCE, RESTATES_QUESTION

__all__ = ["Refusal", "Rulebook", "reformulate"]


@dataclass(frozen=True)
class Refusal:
    """The rules refuse the policy's ``action``; ``message`` goes back to it as the observation."""

    action: Action
    message: str


def reformulate(question: str, tried: list[str], ctx: ToolContext) -> str | None:
    """A new search query, different from every one tried, built from the question's rarest terms.

    Rare terms (by the library's BM25 document frequency) are what a failed search most
    likely diluted: gene names, compounds, methods.
    """
    terms = list(dict.fromkeys(tokenize(question)))
    if not terms:
        return None
    idf: dict[str, float] = {}
    if ctx.searcher is not None:
        bm25 = ctx.searcher.bm25()
        n = bm25.matrix.shape[0]
        for t in terms:
            col = bm25.vocab.get(t)
            idf[t] = math.log(1 + n / (1 + float(bm25.df[col]))) if col is not None else 0.0
    rare = sorted(terms, key=lambda t: -idf.get(t, len(t)))
    candidates = [" ".join(rare[:6]), " ".join(rare[:3]), " ".join(rare[:2]), " ".join(rare[3:9]), rare[0]]
    for query in candidates:
        if query and query not in tried:
            return query
    return None


def _offered_keys(ctx: ToolContext) -> frozenset[str]:
    """The keys of the passages the answer step would be offered now."""
    cfg = ctx.settings
    offered = offered_evidence(ctx.state, min_score=cfg.evidence.min_score, k=cfg.answer.evidence_k)
    return frozenset(e.key for e in offered)


@dataclass(frozen=True)
class Rulebook:
    """The run's rules with their round limits. Every method but :meth:`begin` and :meth:`after`
    is pure, so the loop may ask as often as it likes."""

    max_requery_rounds: int
    max_regenerate_rounds: int
    rewrite_unsupported: bool = False

    @classmethod
    def from_settings(cls, settings: Settings) -> Rulebook:
        a = settings.agent
        return cls(a.max_requery_rounds, a.max_regenerate_rounds, a.rewrite_unsupported)

    def rewritable(self, report: VerificationReport) -> bool:
        """Can a rewrite from the same passages fix the removed claims?

        A fabricated key or a claim without citations is the draft's fault, and a rewrite told so
        can fix it. A claim the judge found no offered passage supporting is the evidence's
        fault: on covidqa-dev a rewrite from the same passages never produced a supported claim
        (0 of 8) and once lost the one claim that had passed, so by default the run re-queries.
        So does a claim that says what its passage discusses instead of what it found: told so,
        the 1.5B model wrote the same kind of claim again in all 7 rewrites tried on covidqa-dev
        (it copies the summariser's "The passage discusses…").
        """
        if self.rewrite_unsupported:
            return True
        return any(c.verdict is Verdict.fabricated or not c.citations for c in report.removed_claims)

    def forced(self, ctx: ToolContext) -> Action | None:
        """The step that must run next, before the policy is asked; None when nothing is forced."""
        state, progress = ctx.state, ctx.state.progress
        if progress.answered and not progress.verified and state.claims:
            return Action("verify_citations", reason="every answer is verified")
        report = state.report
        if (
            progress.verified
            and report is not None
            and report.needs_regeneration
            and report.removed_claims
            and self.rewritable(report)
            and progress.regenerations < self.max_regenerate_rounds
            and not state.options  # feedback reaches free text only; a pick changes with new evidence
        ):
            feedback = "\n".join(_problem(c) for c in report.removed_claims)
            return Action(
                "generate_answer", {"feedback": feedback}, reason="citation check failed: regenerate"
            )
        return None

    def requery(self, ctx: ToolContext) -> Action | None:
        """A search with new terms when the evidence read so far cannot carry an answer.

        Only after the last search's papers were read: until then a failed gate is stale.
        """
        state, progress = ctx.state, ctx.state.progress
        if progress.searched_since_gather or progress.requeries >= self.max_requery_rounds:
            return None
        if state.gate is not None and state.gate.final:
            return None  # new terms cannot tell which paper the question means
        gate_failed = state.gate is not None and not state.gate.passed
        claims_failed = progress.verified and state.report is not None and state.report.needs_more_evidence
        if not (gate_failed or claims_failed):
            return None
        query = reformulate(state.question, state.queries_tried, ctx)
        if query is None:
            return None
        reason = "evidence gate failed: new terms" if gate_failed else "claims failed: search again"
        return Action("paper_search", {"query": query}, reason=reason)

    def repeats_last_answer(self, ctx: ToolContext) -> bool:
        """Did a re-search leave the passages the answer step would see unchanged?

        Answering them again at temperature 0 would write the answer that just failed (seen on
        PubMedQA: three identical rounds), so the run ends instead.
        """
        progress = ctx.state.progress
        return (
            not progress.answered
            and progress.answered_from is not None
            and not progress.searched_since_gather
            and _offered_keys(ctx) == progress.answered_from
        )

    def check(self, ctx: ToolContext, choice: Action | None) -> Action | Refusal | None:
        """The policy's choice let through, rewritten, or refused; None ends the run."""
        state = ctx.state
        if choice is not None and choice.tool == "paper_search":
            query = choice.arguments.get("query")
            if query in state.queries_tried:
                return Refusal(choice, f"the query {query!r} was already tried; use different terms")
            return choice
        if choice is None or choice.tool == "generate_answer":
            # answering (or stopping) on evidence that failed the gate or the citation check:
            # search with new terms first while rounds are left
            requery = self.requery(ctx)
            if requery is not None:
                return requery
        if choice is not None and choice.tool == "generate_answer" and self.repeats_last_answer(ctx):
            return None
        return choice

    def finished(self, ctx: ToolContext) -> bool:
        """Do the rules want nothing more? True once the answer stands checked (or there was
        nothing to check: the gathered evidence was not enough) and no rule asks for a step,
        or when a re-search could not change the answer."""
        if self.forced(ctx) is not None or self.requery(ctx) is not None:
            return False
        state, progress = ctx.state, ctx.state.progress
        nothing_to_check = progress.answered and not state.claims and state.gate is not None
        return progress.verified or nothing_to_check or self.repeats_last_answer(ctx)

    def begin(self, ctx: ToolContext, action: Action) -> None:
        """Spend the round ``action`` takes, before it runs: an attempt that fails still counts,
        so a failing step cannot be retried without bound."""
        state, progress = ctx.state, ctx.state.progress
        if action.tool == "paper_search" and state.queries_tried:
            progress.requeries += 1
            # what was answered and checked belongs to the evidence before this search
            progress.answered = progress.verified = False
            state.report = None
        elif action.tool == "generate_answer" and progress.answered:
            progress.regenerations += 1

    def after(self, ctx: ToolContext, action: Action) -> None:
        """Record what a tool that ran (without error or retry) achieved."""
        progress = ctx.state.progress
        if action.tool == "paper_search":
            progress.searched_since_gather = True
        elif action.tool == "gather_evidence":
            progress.searched_since_gather = False
        elif action.tool == "generate_answer":
            progress.answered, progress.verified = True, False
            progress.answered_from = _offered_keys(ctx)
        elif action.tool == "verify_citations":
            progress.verified = True


def _problem(claim: Claim) -> str:
    """One line of rewrite feedback: what was wrong with a removed claim."""
    if any(check.method == DESCRIBES_SOURCE for check in claim.checks):
        return f"- says what the passage is about, not what it found; state the finding itself: {claim.text}"
    if any(check.method == RESTATES_QUESTION for check in claim.checks):
        return f"- only repeats the question's words; state what the passage answers: {claim.text}"
    return f"- {claim.verdict.value if claim.verdict else ''}: {claim.text}"
