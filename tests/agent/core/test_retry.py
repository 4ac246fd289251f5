"""The one retry engine: backoff, jitter, Retry-After, what is (not) retried, and its two users."""

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from email.utils import format_datetime

import httpx
import pytest

from agent.core import retry as retry_module
from agent.core.errors import (
    LLMError,
    NetworkDownError,
    OnlineError,
    RateLimitError,
    ServiceTimeoutError,
    ServiceUnavailableError,
)
from agent.core.retry import RetryPolicy, retry, retry_after_seconds
from agent.llm import Message
from agent.llm.testing import ScriptedLLM


def failing(*errors: BaseException, result: str = "ok") -> tuple[Callable[[], Awaitable[str]], list[int]]:
    """A call that raises ``errors`` in turn, then returns ``result``; the list counts calls."""
    calls = [0]

    async def call() -> str:
        calls[0] += 1
        if calls[0] <= len(errors):
            raise errors[calls[0] - 1]
        return result

    return call, calls


# --- the policy ---------------------------------------------------------------------------------


def test_backoff_doubles_and_is_capped() -> None:
    policy = RetryPolicy(base_delay_s=1.0, max_delay_s=5.0, jitter=0.0)
    exc = ServiceTimeoutError("t")
    assert [policy.delay(n, exc) for n in range(5)] == [1.0, 2.0, 4.0, 5.0, 5.0]


def test_jitter_stays_within_its_share_of_the_backoff() -> None:
    policy = RetryPolicy(base_delay_s=2.0, max_delay_s=100.0, jitter=0.25)
    exc = ServiceUnavailableError("503")
    for n in range(4):
        backoff = 2.0 * 2**n
        delays = [policy.delay(n, exc) for _ in range(200)]
        assert all(backoff * 0.75 <= d <= backoff for d in delays)
        assert len(set(delays)) > 1  # really randomised


def test_retry_after_is_honoured_exactly_and_capped() -> None:
    policy = RetryPolicy(max_delay_s=20.0)
    assert policy.delay(0, RateLimitError("429", retry_after=7.0)) == 7.0
    assert policy.delay(3, RateLimitError("429", retry_after=3600.0)) == 20.0
    assert policy.delay(0, RateLimitError("429", retry_after=-5.0)) == 0.0
    no_header = policy.delay(0, RateLimitError("429"))
    assert 0.5 <= no_header <= 1.0  # no Retry-After: ordinary backoff


def test_policy_rejects_nonsense() -> None:
    assert RetryPolicy(max_retries=2).attempts == 3
    with pytest.raises(ValueError, match="max_retries"):
        RetryPolicy(max_retries=-1)
    with pytest.raises(ValueError, match="jitter"):
        RetryPolicy(jitter=1.5)


# --- the engine ---------------------------------------------------------------------------------


async def test_transient_errors_are_retried_with_growing_waits() -> None:
    waits: list[float] = []

    async def record(seconds: float) -> None:
        waits.append(seconds)

    call, calls = failing(ServiceTimeoutError("t"), ServiceUnavailableError("503"), RateLimitError("429"))
    policy = RetryPolicy(max_retries=3, base_delay_s=1.0, jitter=0.0)
    assert await retry(call, policy, sleep=record) == "ok"
    assert calls == [4] and waits == [1.0, 2.0, 4.0]


async def test_attempts_are_bounded_and_the_last_error_is_raised(sleeps: list[float]) -> None:
    last = ServiceTimeoutError("third")
    call, calls = failing(ServiceTimeoutError("first"), ServiceTimeoutError("second"), last)
    with pytest.raises(ServiceTimeoutError) as raised:
        await retry(call, RetryPolicy(max_retries=2))
    assert raised.value is last and calls == [3] and len(sleeps) == 2


async def test_zero_retries_means_one_attempt(sleeps: list[float]) -> None:
    call, calls = failing(ServiceUnavailableError("503"))
    with pytest.raises(ServiceUnavailableError):
        await retry(call, RetryPolicy(max_retries=0))
    assert calls == [1] and sleeps == []


@pytest.mark.parametrize(
    "error",
    [
        LLMError("bad request"),
        NetworkDownError("no route to host"),
        OnlineError("bad JSON"),
        ValueError("not ours"),
    ],
)
async def test_non_transient_errors_are_not_retried(error: Exception, sleeps: list[float]) -> None:
    call, calls = failing(error)
    with pytest.raises(type(error)):
        await retry(call, RetryPolicy(max_retries=5))
    assert calls == [1] and sleeps == []


async def test_the_module_hook_is_the_default_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    waits: list[float] = []

    async def record(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr(retry_module, "_sleep", record)
    call, _ = failing(RateLimitError("429", retry_after=3.0))
    await retry(call, RetryPolicy())
    assert waits == [3.0]


# --- Retry-After --------------------------------------------------------------------------------


def test_retry_after_seconds_forms() -> None:
    assert retry_after_seconds("7") == 7.0
    assert retry_after_seconds(" 1.5 ") == 1.5
    assert retry_after_seconds(b"2") == 2.0
    assert retry_after_seconds(4) == 4.0
    assert retry_after_seconds("-3") == 0.0
    for nonsense in (None, "", "soon", "nan", "inf", True):
        assert retry_after_seconds(nonsense) is None


def test_retry_after_http_date() -> None:
    now = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC).timestamp()
    later = format_datetime(datetime(2025, 3, 1, 12, 0, 30, tzinfo=UTC), usegmt=True)
    assert later == "Sat, 01 Mar 2025 12:00:30 GMT"
    assert retry_after_seconds(later, now=now) == 30.0
    assert retry_after_seconds({"Retry-After": later}, now=now) == 30.0
    assert retry_after_seconds("Sat, 01 Mar 2025 11:00:00 GMT", now=now) == 0.0  # already past
    assert retry_after_seconds("Sat, 01 Mar 2025 12:01:00 -0000", now=now) == 60.0


def test_retry_after_from_headers() -> None:
    assert retry_after_seconds(httpx.Headers({"Retry-After": "3"})) == 3.0
    assert retry_after_seconds({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5  # ms wins
    assert retry_after_seconds({"retry-after-ms": "junk", "retry-after": "9"}) == 9.0
    assert retry_after_seconds({"content-type": "application/json"}) is None
    assert retry_after_seconds(object()) is None


# --- the LLM layer goes through the engine ------------------------------------------------------


async def test_llm_rate_limit_then_success_honours_retry_after(sleeps: list[float]) -> None:
    llm = ScriptedLLM([RateLimitError("429", retry_after=7.0), "ok"])
    assert (await llm.complete([Message.user("x")])).text == "ok"
    assert sleeps == [7.0] and len(llm.requests) == 2
    assert len(llm.usage_log) == 1  # only the successful call is accounted


async def test_llm_retries_follow_the_policy(sleeps: list[float]) -> None:
    llm = ScriptedLLM(
        [ServiceTimeoutError("t"), ServiceUnavailableError("503"), "ok"],
        retry=RetryPolicy(max_retries=3, base_delay_s=1.0),
    )
    assert (await llm.complete([Message.user("x")])).text == "ok"
    assert len(llm.requests) == 3
    assert len(sleeps) == 2 and 0.5 <= sleeps[0] <= 1.0 and 1.0 <= sleeps[1] <= 2.0


async def test_llm_non_transient_errors_are_not_retried(sleeps: list[float]) -> None:
    llm = ScriptedLLM([LLMError("bad request"), "never"])
    with pytest.raises(LLMError, match="bad request"):
        await llm.complete([Message.user("x")])
    assert sleeps == [] and llm.remaining == 1


async def test_per_provider_concurrency_limit_holds_across_instances() -> None:
    from agent.llm.testing import FunctionLLM, Request

    active = 0
    peak = 0

    async def slow(req: Request) -> str:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.01)
        active -= 1
        return "ok"

    # two role instances of one provider share the limit
    a = FunctionLLM(slow, concurrency=2)
    b = FunctionLLM(slow, concurrency=2)
    await asyncio.gather(*(llm.complete([Message.user("x")]) for llm in [a, b] * 4))
    assert peak == 2
