"""``generate_answer``: a cited answer, claim by claim, from the gathered evidence only.

The model is offered only the keys of gathered evidence. The JSON schema it must follow lists
them as an enum, so a local model under grammar constraints cannot even spell another key.
``verify_citations`` still checks every key, because an API model's schema may be looser.

Multiple choice (LitQA2 style) has two designs, chosen by ``answer.mc_mode``:
``pick`` asks the answer model for a letter and its citations; ``judge`` scores every option
against each evidence passage with the judge's P(Yes) and takes the best-supported option when
it clears the threshold and leads the runner-up by ``mc_margin``. Either way the chosen option
is a claim like any other and must survive verification.
"""

from __future__ import annotations

import string
from typing import Any

from agent.errors import LLMError, ToolError
from agent.prompts import answer_messages, judge_messages, mc_messages
from agent.state import INSUFFICIENT, Claim, Evidence, RunState
from tools.base import ToolContext, tool

__all__ = ["generate_answer", "insufficient_letter", "offered_evidence", "option_claim"]


def cfg_tokens(ctx: ToolContext, cap: int) -> int:
    """A tool's completion cap, never above the configured ``llm.max_tokens``."""
    return min(cap, ctx.settings.llm.max_tokens)


def offered_evidence(state: RunState, *, min_score: int, k: int) -> list[Evidence]:
    good = [e for e in state.evidence.values() if e.score >= min_score]
    return sorted(good, key=lambda e: (-e.score, -e.retrieval_score))[:k]


def _triples(evidence: list[Evidence], chars: int) -> list[tuple[str, str, str]]:
    return [(e.key, e.summary, e.text[:chars]) for e in evidence]


def _letters(options: list[str]) -> list[tuple[str, str]]:
    return list(zip(string.ascii_uppercase, options, strict=False))


def insufficient_letter(options: list[str]) -> str | None:
    for letter, text in _letters(options):
        if text.strip().lower().startswith("insufficient"):
            return letter
    return None


def option_claim(question: str, option: str) -> str:
    """The claim a chosen option makes, in words the judge can check against a passage."""
    # measured on the local judge: this plain Q/A form separates right from wrong options best
    return f"Question: {question}\nAnswer: {option}"


def _set_insufficient(state: RunState, reason: str) -> None:
    state.claims = []
    state.summary = f"Insufficient evidence to answer: {reason}"
    if state.options:
        state.choice = insufficient_letter(state.options)


async def _free_text(ctx: ToolContext, evidence: list[Evidence], feedback: str) -> str:
    state, cfg = ctx.state, ctx.settings.answer
    keys = [e.key for e in evidence]
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "claims": {
                "type": "array",
                "maxItems": cfg.max_claims,
                "items": {
                    "type": "object",
                    "properties": {
                        "text": {"type": "string"},
                        "citations": {
                            "type": "array",
                            "items": {"type": "string", "enum": keys},
                            "minItems": 1,
                        },
                        "quote": {"type": "string", "maxLength": 300},
                    },
                    "required": ["text", "citations", "quote"],
                },
            },
            "summary": {"type": "string"},
            "limitations": {"type": "string"},
        },
        "required": ["claims", "summary", "limitations"],
    }
    messages = answer_messages(state.question, _triples(evidence, cfg.excerpt_chars), feedback)
    completion = await ctx.llm("answer").complete(
        messages, role="answer", json_schema=schema, max_tokens=cfg_tokens(ctx, 700)
    )
    state.add_usage(completion.usage)
    data = completion.json()
    state.claims = [
        Claim(
            text=str(c.get("text", "")).strip(),
            citations=[str(k) for k in c.get("citations", [])],
            quote=str(c.get("quote", "")).strip(),
        )
        for c in data.get("claims", [])
        if str(c.get("text", "")).strip()
    ][: cfg.max_claims]
    state.summary = str(data.get("summary", "")).strip()
    state.limitations = str(data.get("limitations", "")).strip()
    cited = sorted({k for c in state.claims for k in c.citations})
    return f"Drafted {len(state.claims)} claim(s) citing {cited}."


async def _mc_pick(ctx: ToolContext, evidence: list[Evidence]) -> str:
    state, cfg = ctx.state, ctx.settings.answer
    options = _letters(state.options or [])
    schema = {
        "type": "object",
        "properties": {
            "choice": {"type": "string", "enum": [letter for letter, _ in options]},
            "citations": {"type": "array", "items": {"type": "string", "enum": [e.key for e in evidence]}},
            # capped: an unbounded quote ran past the token limit mid-JSON on 2 of 20 LitQA2 questions
            "quote": {"type": "string", "maxLength": 300},
        },
        "required": ["choice", "citations", "quote"],
    }
    messages = mc_messages(state.question, options, _triples(evidence, cfg.excerpt_chars))
    completion = await ctx.llm("answer").complete(
        messages, role="answer", json_schema=schema, max_tokens=cfg_tokens(ctx, 300)
    )
    state.add_usage(completion.usage)
    data = completion.json()
    letter = str(data.get("choice", "")).strip().upper()[:1]
    texts = dict(options)
    if letter not in texts:
        _set_insufficient(state, f"the model chose no valid option ({data.get('choice')!r})")
        return state.summary
    state.choice = letter
    if letter == insufficient_letter(state.options or []):
        state.claims = []
        state.summary = INSUFFICIENT
        return f"The model abstained ({letter})."
    citations = [str(k) for k in data.get("citations", [])] or [evidence[0].key]
    state.claims = [
        Claim(
            text=option_claim(state.question, texts[letter]),
            citations=citations,
            quote=str(data.get("quote", "")).strip(),
        )
    ]
    state.summary = f"{letter}) {texts[letter]}"
    return f"Chose {letter}) {texts[letter]} citing {citations}."


async def _mc_judge(ctx: ToolContext, evidence: list[Evidence]) -> str:
    state, cfg = ctx.state, ctx.settings
    judge = ctx.llm("judge")
    abstain = insufficient_letter(state.options or [])
    scored: list[tuple[float, str, str, str]] = []
    # passage-major order so consecutive judge calls share the passage prefix in the KV cache
    best: dict[str, tuple[float, str]] = {}
    for e in evidence[:3]:
        for letter, text in _letters(state.options or []):
            if letter == abstain:
                continue
            score = await judge.score_yes(judge_messages(option_claim(state.question, text), e.text))
            state.add_usage(score.usage)
            if score.p_yes > best.get(letter, (-1.0, ""))[0]:
                best[letter] = (score.p_yes, e.key)
    texts = dict(_letters(state.options or []))
    scored = sorted(((p, letter, key, texts[letter]) for letter, (p, key) in best.items()), reverse=True)
    if not scored:
        _set_insufficient(state, "no option to score")
        return state.summary
    top = scored[0]
    runner_up = scored[1][0] if len(scored) > 1 else 0.0
    threshold = (
        cfg.answer.mc_threshold if cfg.answer.mc_threshold is not None else cfg.evidence.judge_threshold
    )
    if top[0] < threshold or top[0] - runner_up < cfg.answer.mc_margin:
        _set_insufficient(
            state, f"no option is clearly supported (best P={top[0]:.2f}, runner-up {runner_up:.2f})"
        )
        return state.summary
    p, letter, key, text = top
    state.choice = letter
    state.claims = [Claim(text=option_claim(state.question, text), citations=[key])]
    state.summary = f"{letter}) {text}"
    return f"Judge chose {letter}) {text} (P(support)={p:.2f} from [{key}])."


@tool
async def generate_answer(ctx: ToolContext, feedback: str = "") -> str:
    """Write the cited answer from the gathered evidence (claims, each citing evidence keys).

    Args:
        feedback: Problems found in a previous draft that this draft must fix (may be empty).
    """
    state, cfg = ctx.state, ctx.settings
    if state.gate is not None and not state.gate.passed:
        _set_insufficient(state, state.gate.reason)
        return state.summary
    evidence = offered_evidence(state, min_score=cfg.evidence.min_score, k=cfg.answer.evidence_k)
    if not evidence:
        _set_insufficient(state, "no gathered evidence scored high enough")
        return state.summary
    try:
        if state.options:
            if cfg.answer.mc_mode == "judge":
                return await _mc_judge(ctx, evidence)
            return await _mc_pick(ctx, evidence)
        return await _free_text(ctx, evidence, feedback)
    except (LLMError, ValueError, TypeError, AttributeError) as exc:
        state.claims = []
        raise ToolError(f"answer generation failed: {type(exc).__name__}: {str(exc)[:200]}") from exc
