import pytest

from agent.errors import LLMError, ProviderTimeoutError, ProviderUnavailableError, RateLimitError
from agent.llm import Message, RetryPolicy
from agent.llm.testing import ScriptedLLM


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    recorded: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        recorded.append(seconds)

    monkeypatch.setattr("agent.llm.base._sleep", fake_sleep)
    return recorded


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
