"""A drafted answer's compound claims are split before the check, and its one-line lead is verified."""

from agent.core.settings import Settings
from agent.core.state import Claim, Verdict
from agent.llm.testing import FunctionLLM, Request, ScriptedLLM
from agent.render import render_text
from corpus.store import Library
from tests.tools.conftest import keyword_judge, make_ctx
from tools.gather_evidence import gather_evidence
from tools.generate_answer import generate_answer
from tools.verify_citations import direct_answer, verify_citations


def key_of(ctx, word: str) -> str:  # type: ignore[no-untyped-def]
    return next(k for k, e in ctx.state.evidence.items() if word in e.text)


async def test_the_supported_half_of_a_compound_claim_survives(library: Library, settings: Settings) -> None:
    ctx = make_ctx(library, settings)
    await gather_evidence(ctx, question="EGFR T790M osimertinib")
    egfr = key_of(ctx, "T790M")
    draft = {
        "claims": [
            {
                "text": "Osimertinib remains active against T790M tumours; "
                "it was approved for every cancer in 1990.",
                "citations": [egfr],
                "quote": "",
            }
        ],
        "summary": "",
        "limitations": "",
    }
    ctx.llms["answer"] = ScriptedLLM([draft])
    observation = await generate_answer(ctx)
    assert "(from 1 drafted)" in observation
    assert [c.text for c in ctx.state.claims] == [
        "Osimertinib remains active against T790M tumours",
        "It was approved for every cancer in 1990",
    ]
    await verify_citations(ctx)
    assert [c.text for c in ctx.state.claims] == ["Osimertinib remains active against T790M tumours"]
    assert ctx.state.claims[0].citations == [egfr]
    report = ctx.state.report
    assert report is not None and [c.verdict for c in report.removed_claims] == [Verdict.unsupported]


async def test_rules_off_checks_the_claim_whole(library: Library, settings: Settings) -> None:
    ctx = make_ctx(
        library,
        settings.model_copy(update={"answer": settings.answer.model_copy(update={"decompose": "off"})}),
    )
    await gather_evidence(ctx, question="EGFR T790M osimertinib")
    egfr = key_of(ctx, "T790M")
    text = "Osimertinib remains active against T790M tumours; it was approved for every cancer in 1990."
    ctx.llms["answer"] = ScriptedLLM(
        [{"claims": [{"text": text, "citations": [egfr], "quote": ""}] * 2, "summary": "", "limitations": ""}]
    )
    await generate_answer(ctx)
    assert [c.text for c in ctx.state.claims] == [text]  # not split, the repeat merged


async def test_the_model_splits_a_long_compound_claim_and_may_not_add_facts(
    library: Library, settings: Settings
) -> None:
    answer_cfg = settings.answer.model_copy(update={"decompose": "model"})
    ctx = make_ctx(library, settings.model_copy(update={"answer": answer_cfg}))
    await gather_evidence(ctx, question="EGFR T790M gefitinib")
    egfr = key_of(ctx, "T790M")
    compound = (
        "The T790M mutation confers resistance to gefitinib and erlotinib in lung tumours, "
        "and osimertinib remains active against tumours carrying T790M."
    )
    draft = {
        "claims": [{"text": compound, "citations": [egfr], "quote": ""}],
        "summary": "",
        "limitations": "",
    }

    def answer(req: Request) -> object:
        if "Sentence:" in req.messages[-1].content:
            return {
                "facts": [
                    "The T790M mutation confers resistance to gefitinib and erlotinib.",
                    "Osimertinib remains active against tumours carrying T790M.",
                    "Patients in Brazil prefer capsules to tablets.",  # new words: never offered
                ]
            }
        return draft

    ctx.llms["answer"] = llm = FunctionLLM(answer)
    await generate_answer(ctx)
    assert [c.text for c in ctx.state.claims] == [
        "The T790M mutation confers resistance to gefitinib and erlotinib",
        "Osimertinib remains active against tumours carrying T790M",
    ]
    assert all(c.citations == [egfr] for c in ctx.state.claims)
    assert len(llm.requests) == 2 and llm.requests[1].json_schema is not None


async def test_a_split_the_model_cannot_give_leaves_the_claim_whole(
    library: Library, settings: Settings
) -> None:
    answer_cfg = settings.answer.model_copy(update={"decompose": "model"})
    ctx = make_ctx(library, settings.model_copy(update={"answer": answer_cfg}))
    await gather_evidence(ctx, question="EGFR T790M gefitinib")
    compound = (
        "The T790M mutation confers resistance to gefitinib and erlotinib in lung tumours, "
        "and osimertinib remains active against tumours carrying T790M."
    )
    draft = {
        "claims": [{"text": compound, "citations": [key_of(ctx, "T790M")], "quote": ""}],
        "summary": "",
        "limitations": "",
    }
    ctx.llms["answer"] = ScriptedLLM([draft, "not json at all"])
    await generate_answer(ctx)
    assert [c.text for c in ctx.state.claims] == [compound]


def _two_claims(ctx, summary: str) -> None:  # type: ignore[no-untyped-def]
    egfr, tp53 = key_of(ctx, "T790M"), key_of(ctx, "TP53 encodes")
    ctx.state.claims = [
        Claim(text="Osimertinib remains active against tumours carrying T790M.", citations=[egfr]),
        Claim(text="TP53 triggers apoptosis after DNA damage.", citations=[tp53]),
    ]
    ctx.state.summary = summary


async def test_a_verified_one_line_answer_opens_the_text(library: Library, settings: Settings) -> None:
    premises: list[str] = []

    def judge(req: Request) -> float:
        premises.append(req.messages[-1].content)
        return keyword_judge(req)

    ctx = make_ctx(library, settings, judge=FunctionLLM(lambda r: "No", score_function=judge))
    await gather_evidence(ctx, question="EGFR T790M TP53 apoptosis")
    _two_claims(ctx, "Osimertinib stays active against T790M, and TP53 triggers apoptosis [Egfr2017].")
    ctx.state.direct = await direct_answer(ctx)
    assert ctx.state.direct == "Osimertinib stays active against T790M, and TP53 triggers apoptosis."
    # judged against the verified claims, not against any passage
    assert "TP53 triggers apoptosis after DNA damage." in premises[-1] and "encodes" not in premises[-1]
    text = render_text(ctx.state)
    lead, rest = text.split("\n\n", 1)
    egfr, tp53 = key_of(ctx, "T790M"), key_of(ctx, "TP53 encodes")
    assert lead == f"Osimertinib stays active against T790M, and TP53 triggers apoptosis [{egfr}][{tp53}]."
    assert rest.startswith("Osimertinib remains active")


async def test_a_one_line_answer_the_claims_do_not_support_is_not_shown(
    library: Library, settings: Settings
) -> None:
    ctx = make_ctx(library, settings)
    await gather_evidence(ctx, question="EGFR T790M TP53 apoptosis")
    _two_claims(ctx, "Gefitinib cures every lung cancer.")
    assert await direct_answer(ctx) == ""
    _two_claims(ctx, "Insufficient evidence to answer: nothing")
    assert await direct_answer(ctx) == ""
    ctx.state.claims = ctx.state.claims[:1]  # one claim is its own direct answer: no judge call
    ctx.state.summary = "Osimertinib remains active against T790M."
    calls = len(ctx.llms["judge"].requests)  # type: ignore[attr-defined]
    assert await direct_answer(ctx) == "" and len(ctx.llms["judge"].requests) == calls  # type: ignore[attr-defined]
