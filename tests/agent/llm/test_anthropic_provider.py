"""The Anthropic provider against a mock transport (the SDK's own httpx fork, httpx2)."""

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx2
import pytest

from agent.core.errors import (
    LLMError,
    MalformedResponseError,
    ModelRequestsDisabledError,
    ServiceTimeoutError,
)
from agent.llm import Message, RetryPolicy, ToolSpec, switch
from agent.llm.anthropic_provider import AnthropicLLM


def message(content: list[dict[str, Any]], **usage: int) -> dict[str, Any]:
    return {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-haiku-4-5",
        "content": content,
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 5, **usage},
    }


Handler = Callable[[httpx2.Request], httpx2.Response]


@pytest.fixture
def allowed() -> Iterator[None]:
    with switch.allow_model_requests():
        yield


def make(handlers: list[Handler], sent: list[dict[str, Any]]) -> AnthropicLLM:
    queue = list(handlers)

    def handle(request: httpx2.Request) -> httpx2.Response:
        sent.append({"headers": dict(request.headers), "body": json.loads(request.content)})
        return queue.pop(0)(request)

    client = httpx2.AsyncClient(transport=httpx2.MockTransport(handle))
    return AnthropicLLM(
        "claude-haiku-4-5", api_key="sk-ant-test-0000", http_client=client, retry=RetryPolicy(max_retries=2)
    )


async def test_switch_blocks_real_requests() -> None:
    llm = make([], [])
    with pytest.raises(ModelRequestsDisabledError):
        await llm.complete([Message.user("hi")])


async def test_text_completion_with_usage_and_cost(allowed: None) -> None:
    sent: list[dict[str, Any]] = []
    llm = make([lambda r: httpx2.Response(200, json=message([{"type": "text", "text": "Hello"}]))], sent)
    c = await llm.complete([Message.system("Be brief."), Message.user("hi")], role="answer")
    assert c.text == "Hello"
    assert c.usage.prompt_tokens == 12 and c.usage.completion_tokens == 5
    assert c.usage.role == "answer" and c.usage.model == "anthropic:claude-haiku-4-5"
    assert c.usage.cost_usd > 0  # priced from litellm's bundled cost map
    body = sent[0]["body"]
    assert body["system"][0]["text"] == "Be brief."
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert any(v.endswith("sk-ant-test-0000") for v in sent[0]["headers"].values())  # key from our config


async def test_structured_output_uses_a_forced_tool(allowed: None) -> None:
    sent: list[dict[str, Any]] = []
    reply = message([{"type": "tool_use", "id": "tu_1", "name": "respond", "input": {"answer": "B"}}])
    llm = make([lambda r: httpx2.Response(200, json=reply)], sent)
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    c = await llm.complete([Message.user("pick")], json_schema=schema)
    assert c.json() == {"answer": "B"}
    assert sent[0]["body"]["tool_choice"] == {"type": "tool", "name": "respond"}
    assert sent[0]["body"]["tools"][0]["input_schema"] == schema


async def test_native_tool_calls(allowed: None) -> None:
    sent: list[dict[str, Any]] = []
    reply = message([{"type": "tool_use", "id": "tu_9", "name": "paper_search", "input": {"query": "EGFR"}}])
    llm = make([lambda r: httpx2.Response(200, json=reply)], sent)
    tools = [ToolSpec(name="paper_search", description="Search papers.", parameters={"type": "object"})]
    c = await llm.complete([Message.user("find")], tools=tools)
    assert [(t.id, t.name, t.arguments) for t in c.tool_calls] == [
        ("tu_9", "paper_search", {"query": "EGFR"})
    ]
    assert sent[0]["body"]["tools"][0]["name"] == "paper_search"


async def test_long_system_prompt_is_cached(allowed: None) -> None:
    sent: list[dict[str, Any]] = []
    reply = message([{"type": "text", "text": "ok"}], cache_read_input_tokens=1500)
    llm = make([lambda r: httpx2.Response(200, json=reply)], sent)
    c = await llm.complete([Message.system("x" * 5000), Message.user("short", cache=True)])
    assert sent[0]["body"]["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert sent[0]["body"]["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert c.usage.cached_prompt_tokens == 1500
    assert c.usage.prompt_tokens == 1512


async def test_429_then_success_honours_retry_after(allowed: None, sleeps: list[float]) -> None:
    sent: list[dict[str, Any]] = []
    limited = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
    llm = make(
        [
            lambda r: httpx2.Response(429, json=limited, headers={"retry-after": "3"}),
            lambda r: httpx2.Response(200, json=message([{"type": "text", "text": "done"}])),
        ],
        sent,
    )
    assert (await llm.complete([Message.user("hi")])).text == "done"
    assert sleeps == [3.0]
    assert len(sent) == 2  # the SDK's own retries are off: one policy governs


async def test_timeout_is_retried_then_reported(allowed: None, sleeps: list[float]) -> None:
    def timeout(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ReadTimeout("timed out", request=request)

    sent: list[dict[str, Any]] = []
    llm = make([timeout, timeout, timeout], sent)
    with pytest.raises(ServiceTimeoutError, match="timed out"):
        await llm.complete([Message.user("hi")])
    assert len(sent) == 3 and len(sleeps) == 2  # max_retries=2: three attempts, two waits


async def test_malformed_response_is_reported(allowed: None) -> None:
    llm = make([lambda r: httpx2.Response(200, json=message([]))], [])
    with pytest.raises(MalformedResponseError, match="empty response"):
        await llm.complete([Message.user("hi")])


async def test_structured_output_missing_is_malformed(allowed: None) -> None:
    llm = make([lambda r: httpx2.Response(200, json=message([{"type": "text", "text": "B"}]))], [])
    with pytest.raises(MalformedResponseError, match="no structured output"):
        await llm.complete([Message.user("hi")], json_schema={"type": "object"})


async def test_bad_request_is_not_retried(allowed: None, sleeps: list[float]) -> None:
    err = {"type": "error", "error": {"type": "invalid_request_error", "message": "bad model"}}
    llm = make([lambda r: httpx2.Response(400, json=err)], [])
    with pytest.raises(LLMError, match="400"):
        await llm.complete([Message.user("hi")])
    assert sleeps == []


async def test_score_yes_falls_back_to_constrained_answer(allowed: None) -> None:
    reply = message([{"type": "tool_use", "id": "t", "name": "respond", "input": {"answer": "Yes"}}])
    llm = make([lambda r: httpx2.Response(200, json=reply)], [])
    score = await llm.score_yes([Message.user("Is it supported?")])
    assert score.p_yes == 1.0 and score.method == "text"
