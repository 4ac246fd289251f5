"""What a run knows: evidence, the drafted answer, verdicts, usage and the step trace.

Everything the tools learn lives in one :class:`RunState`; the final :class:`Answer` is a
JSON-serialisable view of it. Evidence keeps the *original chunk text*, because citations are
checked against what the paper says, never against a model's summary of it.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

from agent.core.models import Paper
from agent.llm.types import Usage

__all__ = [
    "INSUFFICIENT",
    "NO_ANSWER",
    "Answer",
    "CitationCheck",
    "Claim",
    "Evidence",
    "GateResult",
    "OptionScores",
    "Reference",
    "RunProgress",
    "RunState",
    "Status",
    "Step",
    "Verdict",
    "VerificationReport",
    "no_answer",
]

INSUFFICIENT = "Insufficient information to answer the question"
# What a free-form run says when no claim survives. Text that starts with it was written by
# scholarloop, not by a model, so it is the only summary shown without a verified claim.
NO_ANSWER = "Insufficient evidence to answer"


def no_answer(reason: str) -> str:
    return f"{NO_ANSWER}: {reason}"


class Status(StrEnum):
    answered = "answered"
    insufficient_evidence = "insufficient_evidence"
    truncated = "truncated"
    failed = "failed"


class Verdict(StrEnum):
    supported = "supported"
    unsupported = "unsupported"  # type 2: the passage does not say it
    contradicted = "contradicted"  # type 3: the passage says otherwise, or drops a qualifier
    fabricated = "fabricated"  # type 1: the key was never retrieved
    misattributed = "misattributed"  # type 4: another gathered passage supports it
    uncited = "uncited"  # type 4: a factual claim with no citation


class Evidence(BaseModel):
    key: str = Field(description="Stable citation key, e.g. 'Lo2020 pp. 3-4'.")
    chunk_id: str
    doc_id: str
    paper_key: str
    page_start: int | None = None
    page_end: int | None = None
    text: str = Field(description="The original chunk text the citation is checked against.")
    summary: str = ""
    quote: str = ""
    score: int = Field(default=0, ge=0, le=10)
    retrieval_score: float = 0.0
    question: str = ""
    error: str | None = Field(default=None, description="Why the summary failed, when it did.")
    p_answers: float | None = Field(
        default=None,
        description="Free-form runs with evidence.answers_threshold: the judge's P(Yes) that the "
        "passage's quote answers the question.",
    )


class GateResult(BaseModel):
    passed: bool
    pieces: int
    papers: int
    reason: str
    final: bool = Field(
        default=False,
        description="A failure no re-search can mend (the question is ambiguous in this library): "
        "the run ends with the reason instead of searching again.",
    )


class CitationCheck(BaseModel):
    key: str
    verdict: Verdict
    p_support: float | None = None
    method: str = Field(
        description="'unknown-key', 'quote', 'sentence' (restates a passage sentence), 'judge', "
        "'judge+quote', 'describes-source' (says what the passage discusses, not what it found) or "
        "'restates-question' (only the question's own words)."
    )
    suggested_key: str | None = None


class Claim(BaseModel):
    text: str
    citations: list[str] = Field(default_factory=list)
    quote: str = ""
    verdict: Verdict | None = None
    checks: list[CitationCheck] = Field(default_factory=list)


class VerificationReport(BaseModel):
    claims: list[Claim] = Field(default_factory=list)
    faithfulness: float = 0.0
    citation_precision: float = 0.0
    citation_recall: float = 0.0
    counts: dict[str, int] = Field(default_factory=dict)
    removed_claims: list[Claim] = Field(default_factory=list)
    repaired: int = 0
    needs_regeneration: bool = False
    needs_more_evidence: bool = False
    p_answers: float | None = Field(
        default=None, description="Judge P(Yes) that the verified claims answer the question, when asked."
    )


class Reference(BaseModel):
    number: int
    key: str
    doc_id: str
    entry: str
    bibtex: str
    doi: str | None = None


class Step(BaseModel):
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    observation: str = ""
    seconds: float = 0.0
    error: str | None = None


class RunProgress(BaseModel):
    """Where the run stands under the loop's rules: the rulebook reads and writes it, a policy
    only reads it. Kept in the state, not in the rulebook, so a policy stays a pure chooser and
    a trace of the state shows why the loop did what it did."""

    requeries: int = Field(default=0, description="Searches after the first, counted against the limit.")
    regenerations: int = Field(default=0, description="Drafts rewritten after a failed citation check.")
    searched_since_gather: bool = Field(default=False, description="A search found papers not yet read.")
    answered: bool = Field(default=False, description="The answer step ran since the last re-query.")
    verified: bool = Field(default=False, description="The current draft went through the citation check.")
    answered_from: frozenset[str] | None = Field(
        default=None, description="The evidence keys the last answer was offered; None before any answer."
    )


class OptionScores(BaseModel):
    """What a multiple-choice answer was decided from: the judge's P(support) for every option
    on every passage it was offered, and the answer model's pick when it was asked.

    Kept on the answer so a benchmark run can be re-graded under other thresholds and margins
    without re-running a model (``benchmarks/mc_replay.py``)."""

    scores: dict[str, dict[str, float]] = Field(
        default_factory=dict, description="Evidence key → option letter → the judge's P(support)."
    )
    pick: str | None = Field(default=None, description="The answer model's letter, if it was asked.")
    pick_citations: list[str] = Field(default_factory=list)


class RunState(BaseModel):
    """The run's memory, shared by the tools through their context."""

    question: str
    options: list[str] | None = Field(default=None, description="Multiple-choice options, if any.")
    papers: dict[str, Paper] = Field(default_factory=dict)
    evidence: dict[str, Evidence] = Field(default_factory=dict)
    queries_tried: list[str] = Field(default_factory=list)
    candidates: dict[str, float] = Field(
        default_factory=dict,
        description="Papers the searches found (doc id → best paper score): evidence is read from these.",
    )
    gate: GateResult | None = None
    claims: list[Claim] = Field(default_factory=list)
    summary: str = ""
    direct: str = Field(
        default="", description="The one-line answer, once the judge found it follows from verified claims."
    )
    limitations: str = ""
    choice: str | None = Field(default=None, description="The chosen option letter (multiple choice).")
    report: VerificationReport | None = None
    usage: list[Usage] = Field(default_factory=list)
    steps: list[Step] = Field(default_factory=list)
    progress: RunProgress = Field(default_factory=RunProgress)
    option_scores: OptionScores | None = None

    def add_usage(self, usage: Usage) -> None:
        self.usage.append(usage)

    def usage_by_role(self) -> dict[str, Usage]:
        out: dict[str, Usage] = {}
        for u in self.usage:
            out[u.role] = out[u.role] + u if u.role in out else u.model_copy()
        return out

    @property
    def total_tokens(self) -> int:
        return sum(u.total_tokens for u in self.usage)

    @property
    def total_cost(self) -> float:
        return sum(u.cost_usd for u in self.usage)


class Answer(BaseModel):
    """What a user gets back."""

    question: str
    status: Status
    answer: str = Field(description="Rendered text with inline citations.")
    direct: str = Field(
        default="", description="Free-form: the one-line answer that opens the text, when it was verified."
    )
    choice: str | None = None
    choice_text: str | None = None
    claims: list[Claim] = Field(default_factory=list)
    evidence: list[Evidence] = Field(default_factory=list)
    references: list[Reference] = Field(default_factory=list)
    verification: VerificationReport | None = None
    usage: dict[str, Usage] = Field(default_factory=dict)
    seconds: float = 0.0
    error: str | None = None
    trace: list[Step] = Field(default_factory=list)
    option_scores: OptionScores | None = None

    @property
    def total_tokens(self) -> int:
        return sum(u.total_tokens for u in self.usage.values())

    @property
    def cost_usd(self) -> float:
        return sum(u.cost_usd for u in self.usage.values())

    def to_markdown(self) -> str:
        """The answer, its references and its verification as Markdown (what Jupyter shows)."""
        lines = [
            f"**Question:** {self.question}",
            "",
            f"**Status:** {self.status.value}",
            "",
            self.answer,
            "",
        ]
        if self.references:
            lines.append("**References**")
            lines += [f"{r.number}. [{r.key}] {r.entry}" for r in self.references]
            lines.append("")
        if self.verification and self.verification.claims:
            v = self.verification
            lines.append(
                f"**Verification:** {len(v.claims)} claim(s) checked; faithfulness {v.faithfulness:.2f}, "
                f"citation precision {v.citation_precision:.2f}; removed {len(v.removed_claims)}."
            )
            for claim in v.claims:
                lines.append(f"- {claim.verdict.value if claim.verdict else '?'}: {claim.text}")
            lines.append("")
        lines.append(f"_{self.seconds:.1f} s, {self.total_tokens} tokens, ${self.cost_usd:.4f}_")
        return "\n".join(lines)

    def to_html(self) -> str:
        """A self-contained page: each claim's verdict beside the passage it cites, quote marked."""
        from agent.core.html import answer_html  # the kernel module imports this one

        return answer_html(self)

    def _repr_markdown_(self) -> str:  # Jupyter renders the answer, not the repr
        return self.to_markdown()
