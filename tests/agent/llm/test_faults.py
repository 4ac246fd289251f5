"""Real network faults against the litellm provider, through a loopback OpenAI-compatible server.

The respx tests in ``test_litellm_provider.py`` check the error mapping with a mocked transport;
these go over real sockets (``fault_server``), so what is checked is the whole path a user's
request takes: litellm's HTTP client, its exception classes, our mapping, the retry engine, and
then the agent loop and the batch API above it. For each fault: how many requests reached the
server (the attempts are bounded), which waits the retry policy asked for (the ``sleeps``
fixture records them), and which error class comes out.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.api import aask_many
from agent.core.errors import (
    LLMError,
    MalformedResponseError,
    RateLimitError,
    ServiceError,
    ServiceTimeoutError,
    ServiceUnavailableError,
    TransientError,
)
from agent.core.retry import RetryPolicy
from agent.core.settings import Settings, load_settings
from agent.core.state import Status
from agent.llm import Message, switch
from agent.llm.factory import resolve_llm
from agent.llm.litellm_provider import LiteLLM
from agent.llm.testing import Request
from tests.agent.conftest import good_answer, make_session
from tests.agent.llm.fault_server import Fault, FaultServer, running_fault_server

MODEL = "openai/test-model"
TIMEOUT_S = 0.5
# jitter 0: the recorded waits are exactly the policy's backoff, 1 s then 2 s
POLICY = RetryPolicy(max_retries=2, base_delay_s=1.0, max_delay_s=30.0, jitter=0.0)
BACKOFF = [1.0, 2.0]

HANG: Fault = {"kind": "hang", "seconds": 30.0}
TRUNCATED_JSON: Fault = {
    "kind": "ok",
    "content": '{"claims": [{"text": "Osimertinib remains act',
    "finish_reason": "length",
}


def status(code: int, **headers: str) -> Fault:
    return {"kind": "status", "code": code, "headers": headers}


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultServer]:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fault-test-0000")
    with running_fault_server() as srv, switch.allow_model_requests():
        yield srv


def provider(srv: FaultServer, policy: RetryPolicy = POLICY) -> LiteLLM:
    return LiteLLM(MODEL, api_base=srv.api_base, timeout_s=TIMEOUT_S, retry=policy)


# Every fault that waiting can fix: retried to the policy's bound, then its own error class.
TRANSIENT = [
    pytest.param(HANG, ServiceTimeoutError, "timed out", id="hang-past-timeout"),
    pytest.param(status(500), ServiceUnavailableError, "500", id="500"),
    pytest.param(status(502), ServiceUnavailableError, "502", id="502-from-a-proxy"),
    pytest.param(status(503), ServiceUnavailableError, "503", id="503"),
    # a cut-off or non-JSON body is a broken server or proxy reply, not the model's fault
    pytest.param({"kind": "bad_json"}, ServiceUnavailableError, "Unterminated string", id="invalid-body"),
    pytest.param({"kind": "drop"}, ServiceUnavailableError, "Connection error", id="dropped-mid-body"),
]


@pytest.mark.parametrize(("fault", "error", "message"), TRANSIENT)
async def test_a_lasting_fault_is_retried_to_the_bound_then_raised(
    server: FaultServer, sleeps: list[float], fault: Fault, error: type[Exception], message: str
) -> None:
    server.default = fault
    with pytest.raises(error, match=message) as caught:
        await provider(server).complete([Message.user("hi")])
    assert server.attempts == POLICY.attempts == 3
    assert sleeps == BACKOFF
    assert "litellm:openai/test-model" in str(caught.value)  # says which model failed


@pytest.mark.parametrize(("fault", "error", "message"), TRANSIENT)
async def test_a_passing_fault_costs_one_retry(
    server: FaultServer, sleeps: list[float], fault: Fault, error: type[Exception], message: str
) -> None:
    server.script(fault, {"kind": "ok", "content": "recovered"})
    completion = await provider(server).complete([Message.user("hi")])
    assert completion.text == "recovered"
    assert server.attempts == 2 and sleeps == BACKOFF[:1]


async def test_429_waits_as_the_server_asks(server: FaultServer, sleeps: list[float]) -> None:
    server.default = status(429, **{"Retry-After": "7"})
    with pytest.raises(RateLimitError) as caught:
        await provider(server).complete([Message.user("hi")])
    assert caught.value.retry_after == 7.0
    assert server.attempts == 3 and sleeps == [7.0, 7.0]  # Retry-After, not the 1 s / 2 s backoff


async def test_429_retry_after_is_capped(server: FaultServer, sleeps: list[float]) -> None:
    server.default = status(429, **{"Retry-After": "3600"})
    with pytest.raises(RateLimitError):
        await provider(server).complete([Message.user("hi")])
    assert sleeps == [POLICY.max_delay_s] * 2  # a server cannot park the run for an hour


async def test_429_retry_after_ms_is_preferred(server: FaultServer, sleeps: list[float]) -> None:
    server.script(status(429, **{"Retry-After": "2", "retry-after-ms": "1500"}))
    assert (await provider(server).complete([Message.user("hi")])).text == "ok"
    assert server.attempts == 2 and sleeps == [1.5]


async def test_429_without_retry_after_backs_off(server: FaultServer, sleeps: list[float]) -> None:
    server.default = status(429)
    with pytest.raises(RateLimitError) as caught:
        await provider(server).complete([Message.user("hi")])
    assert caught.value.retry_after is None and sleeps == BACKOFF


@pytest.mark.parametrize("code", [400, 401, 403, 404, 422])
async def test_a_refusal_is_not_retried(server: FaultServer, sleeps: list[float], code: int) -> None:
    server.default = status(code)
    with pytest.raises(LLMError) as caught:
        await provider(server).complete([Message.user("hi")])
    assert not isinstance(caught.value, TransientError)
    assert server.attempts == 1 and sleeps == []


async def test_json_mode_reply_cut_off_names_the_token_limit(
    server: FaultServer, sleeps: list[float]
) -> None:
    """The server answered fine; the reply is unusable. Retrying with the same limit would
    cut it off again, so it is one attempt and an error that says what to raise."""
    server.default = TRUNCATED_JSON
    completion = await provider(server).complete([Message.user("hi")], json_schema={"type": "object"})
    assert completion.finish_reason == "length"
    with pytest.raises(MalformedResponseError, match="cut off at the max_tokens limit"):
        completion.json()
    assert server.attempts == 1 and sleeps == []
    sent = server.requests[0].body
    assert sent["response_format"]["type"] == "json_schema"  # JSON mode was asked for


async def test_max_retries_zero_is_one_attempt(server: FaultServer, sleeps: list[float]) -> None:
    server.default = status(503)
    with pytest.raises(ServiceUnavailableError):
        await provider(server, RetryPolicy(max_retries=0)).complete([Message.user("hi")])
    assert server.attempts == 1 and sleeps == []


async def test_settings_bound_the_attempts(
    server: FaultServer, sleeps: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the factory, as a user configures it: the endpoint from OPENAI_API_BASE,
    ``llm.max_retries`` and ``llm.timeout_s`` from settings."""
    monkeypatch.setenv("OPENAI_API_BASE", server.api_base)
    settings = load_settings(environ={}, llm__default=MODEL, llm__max_retries=1, llm__timeout_s=TIMEOUT_S)
    llm = resolve_llm(MODEL, settings)
    server.default = HANG
    with pytest.raises(ServiceTimeoutError, match=f"timed out after {TIMEOUT_S}s"):
        await llm.complete([Message.user("hi")])
    assert server.attempts == 2 and len(sleeps) == 1


# --- end to end: a run whose answer model is the failing server --------------------------------

Q = "Which inhibitor remains active against EGFR T790M tumours?"
BROKEN = "What does TP53 encode?"
OTHER = "Is osimertinib active against T790M?"


def answering(fault_for: dict[str, Fault]) -> Any:
    """A route that answers like ``good_answer``, except for questions listed in ``fault_for``."""

    def route(body: dict[str, Any]) -> Fault:
        prompt = str(body["messages"][-1]["content"])
        for question, fault in fault_for.items():
            if question in prompt:
                return fault
        reply = good_answer(Request(kind="complete", messages=[Message.user(prompt)]))
        return {"kind": "ok", "content": json.dumps(reply)}

    return route


def fast(settings: Settings) -> Settings:
    return settings.with_overrides(llm__max_retries=POLICY.max_retries)


E2E = [
    pytest.param(status(503), "ServiceUnavailableError", "503", POLICY.attempts, id="503"),
    pytest.param(HANG, "ServiceTimeoutError", "timed out", POLICY.attempts, id="hang"),
    pytest.param(status(429, **{"Retry-After": "1"}), "RateLimitError", "429", POLICY.attempts, id="429"),
    pytest.param({"kind": "drop"}, "ServiceUnavailableError", "Connection error", POLICY.attempts, id="drop"),
    pytest.param(TRUNCATED_JSON, "MalformedResponseError", "cut off", 1, id="truncated-json"),
]


@pytest.mark.parametrize(("fault", "error", "message", "per_call"), E2E)
async def test_a_run_whose_answer_model_fails_ends_failed_with_the_reason(
    server: FaultServer,
    sleeps: list[float],
    index_dir: Path,
    settings: Settings,
    fault: Fault,
    error: str,
    message: str,
    per_call: int,
) -> None:
    server.default = fault
    session = make_session(index_dir, settings, answer=provider(server))
    answer = await session.ask(Q)
    assert answer.status in (Status.failed, Status.truncated)
    assert answer.error is not None and error in answer.error and message in answer.error
    assert answer.claims == []  # nothing unverified leaks out of a failed run
    failed = [s for s in answer.trace if s.error]
    assert failed and all(s.tool == "generate_answer" for s in failed)
    # each failed step made at most the policy's attempts; the loop gives up after two in a row
    assert server.attempts == per_call * len(failed) and len(failed) == 2
    assert json.loads(answer.model_dump_json())["error"] == answer.error


async def test_a_batch_goes_on_past_a_failing_question(
    server: FaultServer, sleeps: list[float], index_dir: Path, settings: Settings, tmp_path: Path
) -> None:
    server.route = answering({BROKEN: status(503)})
    session = make_session(index_dir, settings, answer=provider(server))
    out = tmp_path / "answers.jsonl"
    answers = await aask_many([Q, BROKEN, OTHER], session=session, out=out, progress=False)
    assert [a.question for a in answers] == [Q, BROKEN, OTHER]
    assert [a.status for a in answers] == [Status.answered, Status.failed, Status.answered]
    assert answers[1].error is not None and "ServiceUnavailableError" in answers[1].error
    assert answers[0].claims and answers[2].claims
    rows = {r["question"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert rows[BROKEN]["status"] == "failed" and "503" in rows[BROKEN]["error"]
    assert rows[Q]["status"] == rows[OTHER]["status"] == "answered"


async def test_the_error_tree_holds_every_fault(server: FaultServer, sleeps: list[float]) -> None:
    """Whatever the server does, a caller catching ServiceError catches it: the loop relies on
    that to turn a failed model call into a failed step instead of a crashed run."""
    faults = [HANG, status(500), status(502), status(504), status(429), status(401), {"kind": "drop"}]
    for fault in faults:
        server.default = fault
        with pytest.raises(ServiceError):
            await provider(server, RetryPolicy(max_retries=0)).complete([Message.user("hi")])
