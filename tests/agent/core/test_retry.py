import pytest

from agent.core.errors import LLMError, ProviderTimeoutError, ProviderUnavailableError, RateLimitError
from agent.llm import Message, RetryPolicy
from agent.llm.testing import ScriptedLLM


async def test_rate_limit_then_success_honours_retry_after(sleeps: list[float]) -> None:
    llm = ScriptedLLM([RateLimitError("429", retry_after=7.0), "ok"])
    assert (await llm.complete([Message.user("x")])).text == "ok"
    assert sleeps == [7.0]
    assert len(llm.usage_log) == 1  # only the successful call is accounted


async def test_retry_after_is_capped(sleeps: list[float]) -> None:
    llm = ScriptedLLM([RateLimitError("429", retry_after=3600), "ok"], retry=RetryPolicy(max_delay_s=20))
    await llm.complete([Message.user("x")])
    assert sleeps == [20]


async def test_timeouts_and_5xx_back_off_exponentially(sleeps: list[float]) -> None:
    llm = ScriptedLLM(
        [ProviderTimeoutError("t"), ProviderUnavailableError("503"), "ok"],
        retry=RetryPolicy(max_retries=3, base_delay_s=1.0),
    )
    assert (await llm.complete([Message.user("x")])).text == "ok"
    assert len(sleeps) == 2
    assert 0.5 <= sleeps[0] <= 1.0 and 1.0 <= sleeps[1] <= 2.0  # jittered 2**attempt


async def test_retries_are_bounded(sleeps: list[float]) -> None:
    llm = ScriptedLLM([ProviderTimeoutError("t")] * 3, retry=RetryPolicy(max_retries=2))
    with pytest.raises(ProviderTimeoutError):
        await llm.complete([Message.user("x")])
    assert len(sleeps) == 2


async def test_non_transient_errors_are_not_retried(sleeps: list[float]) -> None:
    llm = ScriptedLLM([LLMError("bad request"), "never"])
    with pytest.raises(LLMError, match="bad request"):
        await llm.complete([Message.user("x")])
    assert sleeps == []
    assert llm.remaining == 1


async def test_per_provider_concurrency_limit_holds_across_instances() -> None:
    import asyncio

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
