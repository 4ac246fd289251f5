"""``generate_answer``: a cited answer, claim by claim, from the gathered evidence only.

The model is offered only the keys of gathered evidence. The JSON schema it must follow lists
them as an enum, so a local model under grammar constraints cannot even spell another key.
``verify_citations`` still checks every key, because an API model's schema may be looser.

Multiple choice (LitQA2 style) has three designs, chosen by ``answer.mc_mode``:
``pick`` asks the answer model for a letter and its citations; ``judge`` scores every option
against each evidence passage with the judge's P(Yes) and takes the best-supported option when
it clears the threshold and leads the runner-up by ``mc_margin``; ``hybrid`` (the default) is
``judge``, with the answer model's pick settling a lead under the margin, and ``pick`` for
verdict options (yes/no/maybe, supported/refuted). Every way the chosen option is a claim like
any other and must survive verification.
"""

from __future__ import annotations

from typing import Any

from agent.core.claims import (
    atomic_parts,
    content_words,
    dedupe,
    looks_compound,
    mend_fragments,
    split_claim,
)
from agent.core.errors import ServiceError, ToolError
from agent.core.evidence import insufficient_letter, is_insufficient, letters, offered_evidence
from agent.core.prompts import answer_messages, decompose_messages, judge_messages, mc_messages
from agent.core.state import INSUFFICIENT, Claim, Evidence, OptionScores, RunState, no_answer
from tools.base import ToolContext, tool

__all__ = [
    "ask_pick",
    "atomic_claims",
    "generate_answer",
    "option_claim",
    "option_scores",
    "polarity_options",
]


def cfg_tokens(ctx: ToolContext, cap: int) -> int:
    """A tool's completion cap, never above the configured ``llm.max_tokens``."""
    return min(cap, ctx.settings.llm.max_tokens)


def _triples(evidence: list[Evidence], chars: int) -> list[tuple[str, str, str]]:
    return [(e.key, e.summary, e.text[:chars]) for e in evidence]


def option_claim(question: str, option: str) -> str:
    """The claim a chosen option makes, in words the judge can check against a passage."""
    # measured on the local judge: this plain Q/A form separates right from wrong options best
    return f"Question: {question}\nAnswer: {option}"


_POLARITY = {"yes", "no", "maybe", "true", "false", "supported", "refuted", "supports", "refutes"}


def polarity_options(options: list[str]) -> bool:
    """Are the options verdicts (yes/no/maybe, supported/refuted) rather than content?

    The judge checks that a passage states an option. A passage can state "FISNA" or "48 cell
    types"; it cannot state "yes". Asked about "Answer: yes" and "Answer: no" it leans to Yes for
    both (measured on SciFact and PubMedQA: every judge-chosen verdict was "supported" or
    "yes"), so verdict options are picked by the answer model and then verified.
    """
    content = [o for o in options if not is_insufficient(o)]
    return bool(content) and all(o.strip().lower().rstrip(".") in _POLARITY for o in content)


def _set_insufficient(state: RunState, reason: str) -> None:
    state.claims = []
    state.summary = no_answer(reason)
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
                        # length caps keep the whole reply inside the token cap: on full-text
                        # papers the local model copied passages into a claim until the JSON
                        # was cut off (COVID-QA), and a cut-off reply is a failed answer.
                        # Five claims at these caps, with summary and limitations, fit in ~700.
                        "text": {"type": "string", "maxLength": 220},
                        "citations": {
                            "type": "array",
                            "items": {"type": "string", "enum": keys},
                            "minItems": 1,
                        },
                        "quote": {"type": "string", "maxLength": 200},
                    },
                    "required": ["text", "citations", "quote"],
                },
            },
            "summary": {"type": "string", "maxLength": 300},
            "limitations": {"type": "string", "maxLength": 200},
        },
        "required": ["claims", "summary", "limitations"],
    }
    messages = answer_messages(state.question, _triples(evidence, cfg.excerpt_chars), feedback)
    completion = await ctx.llm("answer").complete(
        messages, role="answer", json_schema=schema, max_tokens=cfg_tokens(ctx, 700)
    )
    state.add_usage(completion.usage)
    data = completion.json()
    drafted = [
        Claim(
            text=str(c.get("text", "")).strip(),
            citations=[str(k) for k in c.get("citations", [])],
            quote=str(c.get("quote", "")).strip(),
        )
        for c in data.get("claims", [])
        if str(c.get("text", "")).strip()
    ][: cfg.max_claims]
    mended, dropped = mend_fragments(drafted)
    state.claims = await atomic_claims(ctx, mended)
    state.summary = str(data.get("summary", "")).strip()
    state.limitations = str(data.get("limitations", "")).strip()
    state.direct = ""
    cited = sorted({k for c in state.claims for k in c.citations})
    split = f" (from {len(drafted)} drafted)" if len(drafted) != len(state.claims) else ""
    torn = f"; {dropped} sentence fragment(s) dropped" if dropped else ""
    return f"Drafted {len(state.claims)} claim(s){split} citing {cited}{torn}."


async def _model_parts(ctx: ToolContext, text: str) -> list[str]:
    """The answer model's split of a long compound claim; [] when it gives no usable split.

    A fact must reuse the claim's words: a "fact" mostly made of new words is the model adding
    something, and is not offered to the check at all.
    """
    schema = {
        "type": "object",
        "properties": {
            "facts": {"type": "array", "maxItems": 4, "items": {"type": "string", "maxLength": 200}}
        },
        "required": ["facts"],
    }
    try:
        completion = await ctx.llm("answer").complete(
            decompose_messages(text), role="answer", json_schema=schema, max_tokens=cfg_tokens(ctx, 250)
        )
        ctx.state.add_usage(completion.usage)
        facts = [str(f).strip() for f in completion.json().get("facts", [])]
    except (ServiceError, ValueError, TypeError, AttributeError):
        return []  # the claim is checked whole, as drafted
    words = content_words(text)
    kept = [
        f.rstrip(".")
        for f in facts
        if len(content_words(f)) >= 3 and len(content_words(f) & words) / len(content_words(f)) >= 0.6
    ]
    return kept if len(kept) >= 2 else []


async def atomic_claims(ctx: ToolContext, claims: list[Claim]) -> list[Claim]:
    """The draft's claims one fact each (``answer.decompose``), repeats merged."""
    cfg = ctx.settings.answer
    if cfg.decompose == "off":
        return dedupe(claims)
    out: list[Claim] = []
    for claim in claims:
        parts = atomic_parts(claim.text)
        if cfg.decompose == "model" and len(parts) == 1 and looks_compound(claim.text):
            parts = await _model_parts(ctx, claim.text) or parts
        out.extend(split_claim(claim, parts))
    return dedupe(out)[: 2 * cfg.max_claims]


async def ask_pick(ctx: ToolContext, evidence: list[Evidence]) -> dict[str, Any]:
    """The answer model's letter, citations and quote for the options (one constrained call)."""
    state, cfg = ctx.state, ctx.settings.answer
    options = letters(state.options or [])
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
    data: dict[str, Any] = completion.json()
    data["choice"] = str(data.get("choice", "")).strip().upper()[:1]
    record = state.option_scores = state.option_scores or OptionScores()
    record.pick = data["choice"]
    record.pick_citations = [str(k) for k in data.get("citations", [])]
    return data


async def _mc_pick(ctx: ToolContext, evidence: list[Evidence]) -> str:
    state = ctx.state
    data = await ask_pick(ctx, evidence)
    letter = data["choice"]
    texts = dict(letters(state.options or []))
    if letter not in texts:
        _set_insufficient(state, f"the model chose no valid option ({letter!r})")
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


async def option_scores(ctx: ToolContext, evidence: list[Evidence]) -> list[tuple[float, str, str]]:
    """(best P(support), letter, key of the passage that gave it) per option, best first."""
    state = ctx.state
    abstain = insufficient_letter(state.options or [])
    best: dict[str, tuple[float, str]] = {}
    record = state.option_scores = OptionScores()
    # passage-major order so consecutive judge calls share the passage prefix in the KV cache
    for e in evidence:
        for letter, text in letters(state.options or []):
            if letter == abstain:
                continue
            p = await ctx.p_yes(judge_messages(option_claim(state.question, text), e.text))
            record.scores.setdefault(e.key, {})[letter] = round(p, 4)
            if p > best.get(letter, (-1.0, ""))[0]:
                best[letter] = (p, e.key)
    return sorted(((p, letter, key) for letter, (p, key) in best.items()), reverse=True)


async def _mc_judge(ctx: ToolContext, evidence: list[Evidence]) -> str:
    """Score every option against every offered passage; answer the clear winner.

    In ``hybrid`` mode a winner whose lead is under ``mc_margin`` is settled by the answer
    model: its pick is accepted only when it is the judge's top option. Two different reads
    of the evidence agreeing is what a small lead lacks (measured on LitQA2: benchmarks/README.md).
    """
    state, cfg = ctx.state, ctx.settings
    scored = await option_scores(ctx, evidence)
    if not scored:
        _set_insufficient(state, "no option to score")
        return state.summary
    texts = dict(letters(state.options or []))
    p, letter, key = scored[0]
    runner_up = scored[1][0] if len(scored) > 1 else 0.0
    threshold = (
        cfg.answer.mc_threshold if cfg.answer.mc_threshold is not None else cfg.evidence.judge_threshold
    )
    how = "Judge chose"
    if p < threshold or p - runner_up < cfg.answer.mc_margin:
        unclear = f"no option is clearly supported (best P={p:.2f}, runner-up {runner_up:.2f})"
        if p < threshold or cfg.answer.mc_mode != "hybrid":
            _set_insufficient(state, unclear)
            return state.summary
        # the best-scored options: one with a local P(Yes); several when an API judge says Yes/No
        best = {other: k for q, other, k in scored if q == p}
        picked = (await ask_pick(ctx, evidence))["choice"]
        if picked not in best:
            _set_insufficient(state, f"{unclear}, and the answer model chose {picked!r}, not {letter}")
            return state.summary
        letter, key = picked, best[picked]
        how = "Judge and answer model agree on"
    state.choice = letter
    state.claims = [Claim(text=option_claim(state.question, texts[letter]), citations=[key])]
    state.summary = f"{letter}) {texts[letter]}"
    return f"{how} {letter}) {texts[letter]} (P(support)={p:.2f} from [{key}], runner-up {runner_up:.2f})."


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
            if cfg.answer.mc_mode == "judge" or (
                cfg.answer.mc_mode == "hybrid" and not polarity_options(state.options)
            ):
                return await _mc_judge(ctx, evidence)
            return await _mc_pick(ctx, evidence)
        return await _free_text(ctx, evidence, feedback)
    except (ServiceError, ValueError, TypeError, AttributeError) as exc:
        state.claims = []
        raise ToolError(f"answer generation failed: {type(exc).__name__}: {str(exc)[:200]}") from exc
