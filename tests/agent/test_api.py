"""The Python API's batch path and public signatures."""

import inspect
import json
from pathlib import Path

import pytest

from agent.api import aask, aask_many, ask, ask_many
from agent.core.settings import Settings
from agent.core.state import Status
from agent.llm.testing import FunctionLLM, Request
from tests.agent.conftest import keyword_summary, make_session

Q = "Which inhibitor remains active against EGFR T790M tumours?"
BROKEN = "Gefitinib and T790M?"  # any question the scripted answer answers


def summary_that_breaks_on(question: str) -> FunctionLLM:
    """A summariser with a bug that only one question's prompts trigger."""

    def summarise(req: Request) -> object:
        if f"Question: {question}" in req.messages[-1].content:
            raise RuntimeError("summariser bug")
        return keyword_summary(req)

    return FunctionLLM(summarise)


async def test_batch_keeps_order_and_isolates_failures(
    index_dir: Path, settings: Settings, tmp_path: Path
) -> None:
    session = make_session(index_dir, settings, summary=summary_that_breaks_on(BROKEN))
    questions = [Q, BROKEN, "EGFR T790M resistance?"]
    out = tmp_path / "answers.jsonl"
    answers = await aask_many(questions, session=session, out=out, concurrency=3, progress=False)
    assert [a.question for a in answers] == questions
    assert [a.status for a in answers] == [Status.answered, Status.failed, Status.answered]
    assert answers[1].error == "RuntimeError: summariser bug"
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["question"] for r in rows) == sorted(questions)  # written as each finished
    assert {r["status"] for r in rows if r["question"] == BROKEN} == {"failed"}


async def test_a_failed_answer_is_retried_on_resume(
    index_dir: Path, settings: Settings, tmp_path: Path
) -> None:
    out = tmp_path / "answers.jsonl"
    broken = make_session(index_dir, settings, summary=summary_that_breaks_on(BROKEN))
    await aask_many([Q, BROKEN], session=broken, out=out, progress=False)
    fixed = make_session(index_dir, settings)
    answers = await aask_many([Q, BROKEN], session=fixed, out=out, progress=False)
    assert [a.status for a in answers] == [Status.answered, Status.answered]
    # the retry replaces the failure: one line per question, as an uninterrupted batch leaves
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["question"] for r in rows) == sorted([Q, BROKEN])
    assert {r["status"] for r in rows} == {"answered"}


async def test_a_failure_of_a_question_not_asked_again_stays_on_record(
    index_dir: Path, settings: Settings, tmp_path: Path
) -> None:
    out = tmp_path / "answers.jsonl"
    broken = make_session(index_dir, settings, summary=summary_that_breaks_on(BROKEN))
    await aask_many([BROKEN], session=broken, out=out, progress=False)
    await aask_many([Q], session=make_session(index_dir, settings), out=out, progress=False)
    statuses = {r["question"]: r["status"] for r in map(json.loads, out.read_text().splitlines())}
    assert statuses == {BROKEN: "failed", Q: "answered"}


async def test_a_resume_after_a_torn_append_leaves_each_question_once(
    index_dir: Path, settings: Settings, tmp_path: Path
) -> None:
    """A kill in the middle of an append leaves a line without its newline: it is cut and redone."""
    out = tmp_path / "answers.jsonl"
    session = make_session(index_dir, settings)
    questions = [Q, "EGFR T790M resistance?", "TP53 apoptosis?"]
    await aask_many(questions[:2], session=session, out=out, progress=False)
    whole = out.read_bytes()
    second = whole.split(b"\n")[1]
    out.write_bytes(whole[: len(whole) - len(second) - 1] + second[: len(second) // 2])
    answers = await aask_many(questions, session=session, out=out, progress=False)
    assert [a.question for a in answers] == questions
    text = out.read_text()
    assert text.endswith("\n")
    rows = [json.loads(line) for line in text.splitlines()]  # every line whole
    assert sorted(r["question"] for r in rows) == sorted(questions)


async def test_a_batch_writes_nothing_unless_told(
    index_dir: Path, settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    before = set(tmp_path.iterdir())
    answers = await aask_many([Q], session=make_session(index_dir, settings), progress=False)
    assert answers[0].status == Status.answered
    assert set(tmp_path.iterdir()) == before


@pytest.mark.parametrize("function", [ask, aask, ask_many, aask_many])
def test_public_functions_show_their_arguments(function: object) -> None:
    params = inspect.signature(function).parameters  # type: ignore[arg-type]
    for name in ("papers", "index", "online", "settings"):
        assert name in params and params[name].kind == inspect.Parameter.KEYWORD_ONLY
    assert inspect.getdoc(function)
