"""Batches on Ray: the same answers, order, resume file and failure isolation as the local path.

One local Ray instance (two CPUs, no dashboard, loopback only) serves the whole module; the tests
that need it skip when the ``ray`` extra is not installed. The workers build their scripted
models from a module-level factory, so nothing but names and settings crosses the process line.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.api import Session, aask_many, load_questions
from agent.core.errors import ConfigError, MissingAPIKeyError
from agent.core.settings import Settings, load_settings
from agent.core.state import Answer, Status
from agent.distributed import SessionRecipe, aask_many_on_ray, run_on_actors
from agent.llm.base import BaseLLM
from agent.llm.testing import FunctionLLM, Request
from tests.agent.conftest import good_answer, keyword_judge, keyword_summary
from tests.tools.conftest import build_three_sources

Q = "Which inhibitor remains active against EGFR T790M tumours?"
BROKEN = "Gefitinib and T790M?"  # any question the scripted answer answers
CRASH = "EGFR gefitinib crash?"
QUESTIONS = [Q, BROKEN, "EGFR T790M resistance?", "Osimertinib and T790M?"]


def summarise(req: Request, *, broken: str | None, crash: str | None) -> object:
    """``keyword_summary``, with a bug one question triggers and one that kills the process."""
    prompt = req.messages[-1].content
    if broken and f"Question: {broken}" in prompt:
        raise RuntimeError("summariser bug")
    if crash and f"Question: {crash}" in prompt:
        os._exit(1)  # a worker process dying mid-question (a segfault, the OOM killer)
    return keyword_summary(req)


def scripted_llms(
    settings: Settings, broken: str | None = None, crash: str | None = None
) -> dict[str, BaseLLM]:
    """Built inside each worker: the functions never have to pickle."""
    answer = FunctionLLM(good_answer)
    return {
        "summary": FunctionLLM(functools.partial(summarise, broken=broken, crash=crash)),
        "judge": FunctionLLM(lambda r: "No", score_function=keyword_judge),
        "answer": answer,
        "agent": answer,
    }


def rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v) for v in value]
    return value


def comparable(answer: Answer) -> dict[str, Any]:
    """What must not depend on where a question ran: timings and usage do, and so does the last
    bit of a float32 retrieval score (a worker's BLAS runs on fewer threads, summing in another order)."""
    return rounded(answer.model_dump(mode="json", exclude={"seconds", "usage", "trace"}))


@pytest.fixture(scope="module")
def ray_instance() -> Iterator[None]:
    ray = pytest.importorskip("ray")
    # tests/conftest.py sets RAY_AUTH_TOKEN: Ray writes no token to ~/.ray for this instance
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_three_sources(tmp_path_factory.mktemp("ray-index"))


@pytest.fixture(scope="module")
def settings() -> Settings:
    return load_settings(
        environ={},
        embedding__model="hash",
        retrieval__top_k=5,
        retrieval__paper_k=5,
        evidence__summarize_k=3,
        evidence__min_score=5,
    )


def recipe(index: Path, settings: Settings, **faults: str) -> SessionRecipe:
    return SessionRecipe(settings=settings, index=index, llms=functools.partial(scripted_llms, **faults))


def read_rows(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.read_text().splitlines()]


@pytest.mark.usefixtures("ray_instance")
async def test_same_answers_order_and_failures_as_the_local_path(
    index: Path, settings: Settings, tmp_path: Path
) -> None:
    local_session = Session(index=index, settings=settings, llms=scripted_llms(settings, broken=BROKEN))
    local = await aask_many(QUESTIONS, session=local_session, out=tmp_path / "local.jsonl", progress=False)
    out = tmp_path / "ray.jsonl"
    items = load_questions(QUESTIONS)
    on_ray = await aask_many_on_ray(
        items, recipe(index, settings, broken=BROKEN), workers=2, concurrency=2, out=out, progress=False
    )
    assert [a.question for a in on_ray] == QUESTIONS
    assert [comparable(a) for a in on_ray] == [comparable(a) for a in local]
    assert on_ray[1].status is Status.failed and on_ray[1].error == "RuntimeError: summariser bug"
    # the resume file has the local path's format: one row per question, id first
    assert sorted(r["id"] for r in read_rows(out)) == sorted(
        r["id"] for r in read_rows(tmp_path / "local.jsonl")
    )


@pytest.mark.usefixtures("ray_instance")
async def test_resume_after_a_partial_file_asks_each_question_once(
    index: Path, settings: Settings, tmp_path: Path
) -> None:
    out = tmp_path / "answers.jsonl"
    first = Session(index=index, settings=settings, llms=scripted_llms(settings, broken=BROKEN))
    await aask_many(QUESTIONS[:2], session=first, out=out, progress=False)  # Q answered, BROKEN failed
    kept = out.read_text().splitlines()[0]  # Q's answer
    with out.open("a") as fh:
        fh.write('{"id": "torn by a cra')  # a crash mid-line
    local_out = tmp_path / "local.jsonl"
    local_out.write_bytes(out.read_bytes())

    answers = await aask_many_on_ray(load_questions(QUESTIONS), recipe(index, settings), workers=1, out=out)
    assert [a.status for a in answers] == [Status.answered] * 4
    rows = read_rows_tolerant(out)
    assert sorted(r["question"] for r in rows if r["status"] == "answered") == sorted(QUESTIONS)  # each once
    assert kept in out.read_text().splitlines()  # Q was not asked again
    # and the file is what the local path leaves after the same resume
    fixed = Session(index=index, settings=settings, llms=scripted_llms(settings))
    await aask_many(QUESTIONS, session=fixed, out=local_out, progress=False)
    shape = [(r["id"], r["status"]) for r in read_rows_tolerant(local_out)]
    assert sorted((r["id"], r["status"]) for r in rows) == sorted(shape)


def read_rows_tolerant(out: Path) -> list[dict[str, Any]]:
    rows = []
    for line in out.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


@pytest.mark.usefixtures("ray_instance")
async def test_a_dead_worker_fails_its_question_and_the_batch_goes_on(
    index: Path, settings: Settings, tmp_path: Path
) -> None:
    questions = [Q, CRASH, "EGFR T790M resistance?", "Osimertinib and T790M?"]
    answers = await aask_many_on_ray(
        load_questions(questions), recipe(index, settings, crash=CRASH), workers=1, out=tmp_path / "a.jsonl"
    )
    assert [a.status for a in answers] == [
        Status.answered,
        Status.failed,
        Status.answered,
        Status.answered,
    ], [a.error for a in answers]
    assert answers[1].error is not None and "Actor" in answers[1].error
    # the one worker was restarted (its models reloaded) and answered the questions after the crash


async def _where(session: Session, payload: int) -> tuple[int, int]:
    return os.getpid(), id(session)


@pytest.mark.usefixtures("ray_instance")
async def test_one_session_per_worker(index: Path, settings: Settings) -> None:
    seen: dict[int, Any] = {}
    await run_on_actors(recipe(index, settings), _where, list(range(8)), seen.__setitem__, workers=2)
    assert sorted(seen) == list(range(8))
    sessions = set(seen.values())
    assert len({pid for pid, _ in sessions}) == 2  # two worker processes
    assert len(sessions) == 2  # each built its session once and kept it


async def test_a_session_cannot_travel_to_ray(index: Path, settings: Settings) -> None:
    session = Session(index=index, settings=settings, llms=scripted_llms(settings))
    with pytest.raises(ConfigError, match="cannot be sent to Ray workers"):
        await aask_many([Q], session=session, ray="local", progress=False)


async def test_without_ray_installed_the_error_says_how_to_get_it(
    index: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(ConfigError, match=r'pip install "scholarloop\[ray\]"'):
        await aask_many([Q], index=index, settings=settings, ray="local", progress=False)


def bench_llms(settings: Settings) -> dict[str, BaseLLM]:
    from tests.agent.cli.conftest import pick_option

    return {**scripted_llms(settings), "answer": FunctionLLM(pick_option), "agent": FunctionLLM(pick_option)}


@pytest.mark.usefixtures("ray_instance")
async def test_bench_on_ray_grades_and_resumes_like_the_local_runner(
    index: Path, settings: Settings, tmp_path: Path
) -> None:
    from agent.cli.bench import run_bench
    from agent.cli.distributed import run_bench_on_ray
    from tests.agent.conftest import write_mini_set

    session = Session(index=index, settings=settings, llms=bench_llms(settings))
    egfr = next(p for p in session.library.papers if p.key.startswith("Egfr"))
    set_path = write_mini_set(tmp_path / "mini.jsonl", egfr.doc_id)
    args: dict[str, Any] = {"limit": None, "seed": 0, "withhold": False, "repeats": 2, "progress": False}
    local = await run_bench([set_path], session, tmp_path / "local", **args)
    # the Ray run resumes a run the local runner started: its first row is not asked again
    (tmp_path / "ray").mkdir()
    first = (tmp_path / "local" / "questions.jsonl").read_text().splitlines()[0]
    (tmp_path / "ray" / "questions.jsonl").write_text(first + "\n")
    on_ray = await run_bench_on_ray(
        [set_path], SessionRecipe(settings=settings, index=index, llms=bench_llms), tmp_path / "ray", **args
    )

    def rows(run: str) -> list[tuple[object, ...]]:
        lines = (tmp_path / run / "questions.jsonl").read_text().splitlines()
        return sorted(
            (r["id"], r["repeat"], tuple(r["options"]), r["choice"], r["correct"])
            for r in map(json.loads, lines)
        )

    assert rows("ray") == rows("local") and len(rows("ray")) == 4
    for metric in ("n", "accuracy", "precision", "coverage"):
        assert on_ray["sets"]["mini"][metric] == local["sets"]["mini"][metric]
    meta = ("seed", "repeats", "withhold_sources", "free_text", "settings")
    assert {k: on_ray[k] for k in meta} == {k: local[k] for k in meta}


def llms_without_a_key(settings: Settings) -> dict[str, BaseLLM]:
    raise MissingAPIKeyError("anthropic", ["ANTHROPIC_API_KEY"], "claude-haiku-4-5")


@pytest.mark.usefixtures("ray_instance")
async def test_a_worker_that_cannot_build_its_session_stops_the_batch_with_the_reason(
    index: Path, settings: Settings, tmp_path: Path
) -> None:
    broken = SessionRecipe(settings=settings, index=index, llms=llms_without_a_key)
    with pytest.raises(
        ConfigError, match="could not build its session: MissingAPIKeyError: .* set ANTHROPIC_API_KEY"
    ):
        await aask_many_on_ray(load_questions([Q]), broken, workers=1, out=tmp_path / "a.jsonl")
    assert not (tmp_path / "a.jsonl").exists()  # nothing answered, nothing written
