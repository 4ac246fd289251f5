"""The litellm provider against respx-mocked OpenAI-compatible HTTP (no network)."""

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import respx

from agent.core.errors import LLMError, ServiceTimeoutError, ServiceUnavailableError
from agent.llm import Message, RetryPolicy, ToolSpec, switch
from agent.llm.litellm_provider import LiteLLM

URL = "https://api.openai.com/v1/chat/completions"


def chat(content: str | None = "Hello", tool_calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "gpt-4o-mini",
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}
        ],
        "usage": {"prompt_tokens": 20, "completion_tokens": 4, "total_tokens": 24},
    }


@pytest.fixture
def llm(monkeypatch: pytest.MonkeyPatch) -> Iterator[LiteLLM]:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0000")
    with switch.allow_model_requests():
        yield LiteLLM("openai/gpt-4o-mini", retry=RetryPolicy(max_retries=2), timeout_s=5)


@respx.mock
async def test_success_with_usage_and_cost(llm: LiteLLM) -> None:
    route = respx.post(URL).mock(return_value=httpx.Response(200, json=chat("Hello")))
    c = await llm.complete([Message.system("brief"), Message.user("hi")], role="summary")
    assert c.text == "Hello"
    assert (c.usage.prompt_tokens, c.usage.completion_tokens) == (20, 4)
    assert c.usage.role == "summary" and c.usage.model == "litellm:openai/gpt-4o-mini"
    assert c.usage.cost_usd > 0
    assert route.called
    assert route.calls[0].request.headers["authorization"] == "Bearer sk-test-0000"


@respx.mock
async def test_json_schema_and_tools_are_sent(llm: LiteLLM) -> None:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "paper_search", "arguments": '{"query": "EGFR"}'},
    }
    route = respx.post(URL).mock(return_value=httpx.Response(200, json=chat(None, [call])))
    tools = [ToolSpec(name="paper_search", description="Search.", parameters={"type": "object"})]
    c = await llm.complete([Message.user("find")], tools=tools)
    assert c.tool_calls[0].name == "paper_search" and c.tool_calls[0].arguments == {"query": "EGFR"}
    import json

    body = json.loads(route.calls[0].request.content)
    assert body["tools"][0]["function"]["name"] == "paper_search"


@respx.mock
async def test_429_then_success(llm: LiteLLM, sleeps: list[float]) -> None:
    error = {"error": {"message": "Rate limit", "type": "rate_limit_error", "code": "rate_limit_exceeded"}}
    route = respx.post(URL).mock(
        side_effect=[
            httpx.Response(429, json=error, headers={"retry-after": "2"}),
            httpx.Response(200, json=chat("after")),
        ]
    )
    assert (await llm.complete([Message.user("hi")])).text == "after"
    assert route.call_count == 2
    assert sleeps == [pytest.approx(2.0)]  # the server's Retry-After, not the backoff


@respx.mock
async def test_timeout_is_retried_then_reported(llm: LiteLLM, sleeps: list[float]) -> None:
    route = respx.post(URL).mock(side_effect=httpx.ReadTimeout("timed out"))
    with pytest.raises(ServiceTimeoutError):
        await llm.complete([Message.user("hi")])
    assert route.call_count == 3 and len(sleeps) == 2


@respx.mock
async def test_unreadable_body_is_retried_as_unavailable(llm: LiteLLM, sleeps: list[float]) -> None:
    # litellm reads a non-JSON body as a broken server or proxy page (InternalServerError)
    route = respx.post(URL).mock(return_value=httpx.Response(200, content=b"<html>oops</html>"))
    with pytest.raises(ServiceUnavailableError, match="invalid response"):
        await llm.complete([Message.user("hi")])
    assert route.call_count == 3 and len(sleeps) == 2


@respx.mock
async def test_auth_error_is_not_retried(llm: LiteLLM, sleeps: list[float]) -> None:
    error = {
        "error": {"message": "Incorrect API key", "type": "invalid_request_error", "code": "invalid_api_key"}
    }
    respx.post(URL).mock(return_value=httpx.Response(401, json=error))
    with pytest.raises(LLMError, match="rejected"):
        await llm.complete([Message.user("hi")])
    assert sleeps == []
