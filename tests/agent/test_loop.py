import asyncio
import json
from pathlib import Path

import pytest

from agent.api import ask, ask_many
from agent.core.errors import ServiceUnavailableError
from agent.core.retry import RetryPolicy
from agent.core.settings import Settings
from agent.core.state import INSUFFICIENT, Answer, Status, Verdict
from agent.llm.testing import FunctionLLM, Request, ScriptedLLM, tool_call
from tests.agent.conftest import good_answer, keyword_summary, make_session

Q = "Which inhibitor remains active against EGFR T790M tumours?"


async def test_clean_run(index_dir: Path, settings: Settings) -> None:
    events: list[str] = []
    session = make_session(index_dir, settings)
    answer = await session.ask(Q, on_event=lambda e, d: events.append(e))
    assert answer.status == Status.answered
    assert [s.tool for s in answer.trace] == [
        "paper_search",
        "gather_evidence",
        "generate_answer",
        "verify_citations",
    ]
    assert answer.claims[0].verdict == Verdict.supported
    assert "Osimertinib remains active" in answer.answer and "[Egfr2017]" in answer.answer
    assert answer.references[0].key == "Egfr2017" and "@misc{Egfr2017" in answer.references[0].bibtex
    assert {"step", "observation", "done"} <= set(events)
    # the verbatim quote needed no judge call; the one judge call asks whether the claim answers Q
    assert set(answer.usage) == {"summary", "answer", "judge"}
    again = Answer.model_validate_json(answer.model_dump_json())
    assert again == answer
    assert "**References**" in answer.to_markdown() and answer._repr_markdown_() == answer.to_markdown()


async def test_an_answer_of_several_claims_opens_with_its_verified_one_line_answer(
    index_dir: Path, settings: Settings
) -> None:
    def two_claims(req: Request) -> dict[str, object]:
        draft = good_answer(req)
        keys = [
            line[1 : line.index("]")]
            for line in req.messages[-1].content.splitlines()
            if line.startswith("[")
        ]
        tp53 = next(k for k in keys if not k.startswith("Egfr"))
        draft["claims"].append(  # type: ignore[attr-defined]
            {
                "text": "TP53 mutations are the most common alteration in human cancer.",
                "citations": [tp53],
                "quote": "",
            }
        )
        draft["summary"] = (
            "Osimertinib remains active against T790M tumours, while TP53 mutations are common."
        )
        return draft

    session = make_session(index_dir, settings, answer=FunctionLLM(two_claims))
    answer = await session.ask(Q + " And how common are TP53 mutations?")
    assert answer.status == Status.answered and len(answer.claims) == 2
    assert (
        answer.direct == "Osimertinib remains active against T790M tumours, while TP53 mutations are common."
    )
    assert answer.answer.startswith(answer.direct.rstrip(".") + " [")
    assert set(answer.usage) == {"summary", "answer", "judge"}


async def test_a_re_query_reads_only_passages_it_has_not_read(index_dir: Path, settings: Settings) -> None:
    read: list[str] = []

    def picky_summary(req: Request) -> object:
        read.append(req.messages[-1].content)
        out = keyword_summary(req)
        out["score"] = 2  # nothing is good enough: the gate fails and the run searches again
        return out

    session = make_session(index_dir, settings, summary=FunctionLLM(picky_summary))
    answer = await session.ask(Q)
    tools = [s.tool for s in answer.trace]
    assert tools[:4] == ["paper_search", "gather_evidence", "paper_search", "gather_evidence"]
    queries = [s.arguments["query"] for s in answer.trace if s.tool == "paper_search"]
    assert queries[0] == Q and queries[1] != Q and "t790m" in queries[1]
    assert "FAILED" in answer.trace[1].observation and answer.trace[1].observation.startswith("Read 3 new")
    # the re-query's best passages are the three already read: they are not read again
    assert answer.trace[3].observation.startswith("Read 0 new") and "FAILED" in answer.trace[3].observation
    assert len(read) == 3 and answer.status == Status.insufficient_evidence


async def test_gate_never_passes_gives_insufficient_evidence(index_dir: Path, settings: Settings) -> None:
    low = FunctionLLM(lambda r: {"summary": "unrelated", "score": 1, "quote": ""})
    answer = await make_session(index_dir, settings, summary=low).ask(Q)
    assert answer.status == Status.insufficient_evidence
    assert answer.claims == [] and "Insufficient evidence" in answer.answer
    assert "scored ≥" in answer.answer.splitlines()[0]  # the gate's reason, not a generic one
    # with what was found: the passages' own words under their keys, never the model's summaries
    found = answer.answer.split("Passages read (not enough to answer):\n", 1)[1].splitlines()
    assert len(found) == 3 and all(line.startswith("- [") for line in found)
    assert {line[3 : line.index("]")] for line in found} <= {e.key for e in answer.evidence}
    assert "unrelated" not in answer.answer
    assert sum(s.tool == "paper_search" for s in answer.trace) == 1 + settings.agent.max_requery_rounds


async def test_citation_check_fails_then_regeneration_passes(index_dir: Path, settings: Settings) -> None:
    """A draft citing a key nothing was retrieved under is rewritten with the failure as feedback."""
    drafts = iter(
        [
            lambda key: {
                "claims": [
                    {"text": "Aspirin cures lung cancer.", "citations": ["Nowhere2020 p. 1"], "quote": ""}
                ],
                "summary": "",
                "limitations": "",
            },
            None,
        ]
    )

    def answer(req: Request) -> object:
        first = next(drafts, None)
        if first is not None:
            key = next(
                line[1 : line.index("]")]
                for line in req.messages[-1].content.splitlines()
                if line.startswith("[Egfr")
            )
            return first(key)
        assert "previous draft had problems" in req.messages[-1].content
        return good_answer(req)

    result = await make_session(index_dir, settings, answer=FunctionLLM(answer)).ask(Q)
    tools = [s.tool for s in result.trace]
    assert tools[-4:] == ["generate_answer", "verify_citations", "generate_answer", "verify_citations"]
    assert result.status == Status.answered and "Osimertinib" in result.answer
    assert "Aspirin" not in result.answer


async def test_a_draft_no_passage_supports_is_not_rewritten_from_the_same_passages(
    index_dir: Path, settings: Settings
) -> None:
    """Unsupported by every offered passage: the run searches again instead of rewriting."""

    def answer(req: Request) -> object:
        key = next(
            line[1 : line.index("]")]
            for line in req.messages[-1].content.splitlines()
            if line.startswith("[")
        )
        return {
            "claims": [{"text": "Aspirin cures lung cancer.", "citations": [key], "quote": ""}],
            "summary": "",
            "limitations": "",
        }

    result = await make_session(index_dir, settings, answer=FunctionLLM(answer)).ask(Q)
    tools = [s.tool for s in result.trace]
    first_check = tools.index("verify_citations")
    assert tools[first_check + 1] == "paper_search"
    assert result.status == Status.insufficient_evidence and "Aspirin" not in result.answer


async def test_a_verified_answer_to_another_question_sends_the_run_to_search_then_abstains(
    index_dir: Path, settings: Settings
) -> None:
    """Every claim is in its passage but none answers the question: withdrawn, searched again,
    and with nothing better found, "insufficient evidence" rather than a true, useless answer."""

    def judge(req: Request) -> float:
        return 0.1 if "Does the statement answer the question?" in req.messages[-1].content else 0.95

    # the passages pass (the gate's own check is off): only the drafted claims miss the question
    gated = settings.with_overrides(answer__answers_threshold=0.5)
    gated = gated.model_copy(
        update={"evidence": gated.evidence.model_copy(update={"answers_threshold": None})}
    )
    session = make_session(index_dir, gated, judge=FunctionLLM(lambda r: "No", score_function=judge))
    result = await session.ask(Q)
    tools = [s.tool for s in result.trace]
    first_check = tools.index("verify_citations")
    assert tools[first_check + 1] == "paper_search"
    assert "do not answer the question" in result.trace[first_check].observation
    assert result.status == Status.insufficient_evidence and not result.claims


async def test_a_re_search_that_finds_nothing_new_does_not_answer_again(
    index_dir: Path, settings: Settings
) -> None:
    """The pick fails verification; the re-search reads the same three passages, so answering
    again at temperature 0 would repeat the failed pick: the run ends in one answer."""
    pick_mode = settings.with_overrides(answer__mc_mode="pick")
    picks = ScriptedLLM([{"choice": "B", "citations": [], "quote": ""}])  # a second call would fail
    session = make_session(
        index_dir, pick_mode, answer=picks, judge=FunctionLLM(lambda r: "No", score_function=lambda r: 0.1)
    )
    answer = await session.ask(Q, options=["Osimertinib", "Aspirin"])
    tools = [s.tool for s in answer.trace]
    assert tools.count("generate_answer") == 1 and tools.count("paper_search") == 2
    assert answer.status == Status.insufficient_evidence and answer.choice_text == INSUFFICIENT


@pytest.mark.parametrize(
    ("override", "reason"),
    [
        ({"max_steps": 3}, "step budget"),
        ({"max_llm_calls": 2}, "model-call budget"),
        ({"max_tokens": 50}, "token budget"),
    ],
)
async def test_budgets_truncate(
    index_dir: Path, settings: Settings, override: dict[str, int], reason: str
) -> None:
    capped = settings.with_overrides(agent=override)
    answer = await make_session(index_dir, capped).ask(Q)
    assert answer.status == Status.truncated and reason in (answer.error or "")
    assert answer.claims == []  # nothing verified yet, so nothing is returned


async def test_cost_budget(index_dir: Path, settings: Settings) -> None:
    from agent.llm.types import Completion, Usage

    def pricey(req: Request) -> Completion:
        return Completion(text=json.dumps(keyword_summary(req)), usage=Usage(cost_usd=0.6))

    capped = settings.with_overrides(agent={"max_cost_usd": 1.0})
    answer = await make_session(index_dir, capped, summary=FunctionLLM(pricey)).ask(Q)
    assert answer.status == Status.truncated and "cost budget" in (answer.error or "")


async def test_wall_clock_budget(index_dir: Path, settings: Settings) -> None:
    async def slow(req: Request) -> object:
        await asyncio.sleep(5)
        return keyword_summary(req)

    capped = settings.with_overrides(agent={"timeout_s": 0.3})
    answer = await make_session(index_dir, capped, summary=FunctionLLM(slow)).ask(Q)
    assert answer.status == Status.truncated and "wall-clock" in (answer.error or "")


async def test_truncation_keeps_the_best_verified_answer(index_dir: Path, settings: Settings) -> None:
    bad = {"text": "Aspirin cures lung cancer.", "citations": ["Egfr2017"], "quote": ""}
    calls = {"n": 0}

    def answer(req: Request) -> object:
        calls["n"] += 1
        if calls["n"] == 1:  # one good claim and one bad: verification keeps the good one
            draft = good_answer(req)
            draft["claims"] = [*draft["claims"], bad]  # type: ignore[misc]
            return draft
        return {"claims": [bad], "summary": "", "limitations": ""}

    # search, gather, answer, verify, regenerate: the budget stops the run before the new draft is verified
    capped = settings.with_overrides(agent={"max_steps": 5, "rewrite_unsupported": True})
    result = await make_session(index_dir, capped, answer=FunctionLLM(answer)).ask(Q)
    assert [s.tool for s in result.trace][-2:] == ["verify_citations", "generate_answer"]
    assert result.status == Status.truncated and "step budget" in (result.error or "")
    assert [c.text for c in result.claims] == ["Osimertinib remains active against tumours carrying T790M."]
    assert result.claims[0].verdict == Verdict.supported and "Aspirin" not in result.answer


async def test_an_unverified_summary_never_becomes_the_answer(index_dir: Path, settings: Settings) -> None:
    """Every draft claim fails verification, but the draft's summary repeats it with a citation.

    The summary was never checked, so the user sees an insufficient-evidence answer, not it
    (seen on the demo PDFs: the failed claim came back as the summary of a truncated run)."""
    bad = "Aspirin cures lung cancer"

    def answer(req: Request) -> object:
        return {
            "claims": [{"text": f"{bad}.", "citations": ["Egfr2017"], "quote": ""}],
            "summary": f"{bad} [Egfr2017].",
            "limitations": "",
        }

    for cap in (100, 5):  # ends by giving up; ends on the budget right after a draft
        capped = settings.with_overrides(agent={"max_steps": cap})
        result = await make_session(index_dir, capped, answer=FunctionLLM(answer)).ask(Q)
        assert bad not in result.answer and result.claims == []
        assert result.answer.startswith("Insufficient evidence")
        assert result.status in {Status.insufficient_evidence, Status.truncated}


class OnceBroken(FunctionLLM):
    """Answers like ``good_answer``, but its first request fails with a 503; counts attempts."""

    def __init__(self) -> None:
        super().__init__(good_answer, retry=RetryPolicy(max_retries=0))
        self.attempts = 0

    async def _complete(self, messages, **kw):  # type: ignore[no-untyped-def, override]
        self.attempts += 1
        if self.attempts == 1:
            raise ServiceUnavailableError("503 from provider")
        return await super()._complete(messages, **kw)


async def test_provider_error_is_retried_after_a_backoff(
    index_dir: Path, settings: Settings, sleeps: list[float]
) -> None:
    answer_llm = OnceBroken()
    answer_llm.retry = RetryPolicy(max_retries=1, base_delay_s=2.0, jitter=0.0)
    result = await make_session(index_dir, settings, answer=answer_llm).ask(Q)
    assert answer_llm.attempts == len(answer_llm.requests) + 1  # the failed call was made again
    assert sleeps == [2.0]  # after the policy's first backoff, no jitter
    assert not [s for s in result.trace if s.error]  # the step never saw the 503
    assert result.status == Status.answered


async def test_provider_error_after_its_retries_is_an_observation(
    index_dir: Path, settings: Settings, sleeps: list[float]
) -> None:
    answer_llm = OnceBroken()  # no retries left in the provider: the loop sees the error
    result = await make_session(index_dir, settings, answer=answer_llm).ask(Q)
    errors = [s for s in result.trace if s.error]
    assert len(errors) == 1 and "503" in (errors[0].error or "")
    assert answer_llm.attempts == len(answer_llm.requests) + 1 and sleeps == []
    assert result.status == Status.answered  # the policy ran the tool again


async def test_provider_down_fails_the_run_with_the_error(index_dir: Path, settings: Settings) -> None:
    down = FunctionLLM(lambda r: ServiceUnavailableError("provider down"))
    down.retry = RetryPolicy(max_retries=0)
    result = await make_session(index_dir, settings, answer=down).ask(Q)
    assert result.status == Status.failed and "provider down" in (result.error or "")


async def test_llm_policy_chooses_tools(index_dir: Path, settings: Settings) -> None:
    agent = ScriptedLLM(
        [
            tool_call("paper_search", query="EGFR T790M osimertinib"),
            tool_call("gather_evidence", question=Q),
            tool_call("generate_answer"),
        ]
    )
    session = make_session(index_dir, settings.with_overrides(agent={"policy": "llm"}), agent=agent)
    result = await session.ask(Q)
    assert [s.tool for s in result.trace] == [
        "paper_search",
        "gather_evidence",
        "generate_answer",
        "verify_citations",
    ]
    assert result.status == Status.answered
    assert agent.requests[0].tools and {t.name for t in agent.requests[0].tools} == {
        "paper_search",
        "gather_evidence",
        "generate_answer",
        "verify_citations",
    }


def test_ask_inside_a_running_loop_returns_an_answer(index_dir: Path, settings: Settings) -> None:
    session = make_session(index_dir, settings)

    async def notebook_cell() -> Answer:
        # what a Jupyter cell does: call the sync API while a loop is running
        return ask(Q, index=index_dir, settings=settings, llms=session.llms)  # type: ignore[arg-type]

    answer = asyncio.run(notebook_cell())
    assert isinstance(answer, Answer) and answer.status == Status.answered


class SimulatedCrash(BaseException):
    """Like Ctrl-C or a killed process: not an Exception, so nothing in the batch catches it."""


def test_batch_resumes_after_a_crash(index_dir: Path, settings: Settings, tmp_path: Path) -> None:
    out = tmp_path / "answers.jsonl"
    questions = tmp_path / "q.txt"
    questions.write_text(
        "Which inhibitor works on T790M?\nWhat does TP53 encode?\nWhat is kinase resistance?\n"
    )
    calls = {"n": 0}

    def crashy(req: Request) -> object:
        calls["n"] += 1
        if "Question: What is kinase resistance?" in req.messages[-1].content and calls["n"] < 100:
            raise SimulatedCrash("simulated Ctrl-C")
        return keyword_summary(req)

    session = make_session(index_dir, settings, summary=FunctionLLM(crashy))
    with pytest.raises(SimulatedCrash):
        ask_many(questions, session=session, out=out, progress=False)
    assert len(out.read_text().splitlines()) == 2
    before = calls["n"]
    calls["n"] = 1000  # no more crashes
    answers = ask_many(questions, session=make_session(index_dir, settings), out=out, progress=False)
    assert len(answers) == 3 and len(out.read_text().splitlines()) == 3
    assert before > 0


async def test_passages_that_do_not_answer_end_in_abstention_without_a_draft(
    index_dir: Path, settings: Settings
) -> None:
    """With ``evidence.answers_threshold`` the cheap way out: every round's passages are judged
    against the question, none answers, so the run searches again and abstains, never drafting."""

    def judge(req: Request) -> float:
        assert "Does the statement answer the question?" in req.messages[-1].content
        return 0.1

    gated = settings.with_overrides(evidence__answers_threshold=0.4)
    answer_model = FunctionLLM(lambda r: pytest.fail("no draft when no passage answers"))
    session = make_session(
        index_dir, gated, judge=FunctionLLM(lambda r: "No", score_function=judge), answer=answer_model
    )
    result = await session.ask(Q)
    tools = [s.tool for s in result.trace]
    assert tools.count("paper_search") == 1 + gated.agent.max_requery_rounds
    assert "verify_citations" not in tools
    assert result.status == Status.insufficient_evidence and not result.claims
    assert "no passage read answers the question" in result.answer.splitlines()[0]
    assert "answer" not in result.usage and result.usage["judge"].calls >= 1
