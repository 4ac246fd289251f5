import asyncio

import pytest

from agent.core.errors import MalformedResponseError, ScriptExhaustedError
from agent.llm import Message, ToolSpec, Usage
from agent.llm.testing import FunctionLLM, Request, ScriptedLLM, tool_call


async def test_scripted_replays_in_order_and_records_requests() -> None:
    llm = ScriptedLLM(["first", {"answer": "B"}])
    a = await llm.complete([Message.user("q1")], role="answer")
    b = await llm.complete([Message.user("q2")], role="summary", json_schema={"type": "object"})
    assert a.text == "first"
    assert b.json() == {"answer": "B"}
    assert [r.prompt for r in llm.requests] == ["q1", "q2"]
    assert llm.requests[1].json_schema == {"type": "object"}
    assert [u.role for u in llm.usage_log] == ["answer", "summary"]
    assert all(u.model == "test:scripted" and u.prompt_tokens >= 0 for u in llm.usage_log)


async def test_scripted_fails_loudly_when_the_script_runs_out() -> None:
    llm = ScriptedLLM(["only one"])
    await llm.complete([Message.user("a")])
    with pytest.raises(ScriptExhaustedError, match="ran out after 1 replies.*'b'"):
        await llm.complete([Message.user("b")])


async def test_scripted_tool_calls_exceptions_and_scores() -> None:
    llm = ScriptedLLM().enqueue(tool_call("paper_search", query="EGFR T790M"), ValueError("boom"), 0.83)
    tools = [ToolSpec(name="paper_search", description="search")]
    c = await llm.complete([Message.user("go")], tools=tools)
    assert c.tool_calls[0].name == "paper_search"
    assert c.tool_calls[0].arguments == {"query": "EGFR T790M"}
    assert llm.requests[0].tools == tools
    with pytest.raises(ValueError, match="boom"):
        await llm.complete([Message.user("again")])
    score = await llm.score_yes([Message.user("supported?")])
    assert score.p_yes == pytest.approx(0.83)
    assert score.usage.role == "judge"
    assert llm.remaining == 0


async def test_function_llm_decides_from_the_request() -> None:
    def reply(req: Request) -> str:
        return "Yes" if "T790M" in req.prompt else "No"

    llm = FunctionLLM(reply)
    assert (await llm.complete([Message.user("about T790M")])).text == "Yes"
    assert (await llm.score_yes([Message.user("about TP53")])).p_yes == 0.0
    assert (await llm.score_yes([Message.user("about T790M")])).p_yes == 1.0


async def test_function_llm_accepts_async_functions_and_score_function() -> None:
    async def reply(req: Request) -> dict[str, int]:
        await asyncio.sleep(0)
        return {"n": len(req.messages)}

    llm = FunctionLLM(reply, score_function=lambda req: 0.25)
    c = await llm.complete([Message.system("s"), Message.user("u")])
    assert c.json() == {"n": 2}
    assert (await llm.score_yes([Message.user("x")])).p_yes == 0.25


async def test_usage_callback_sees_every_call() -> None:
    seen: list[Usage] = []
    llm = ScriptedLLM(["a", "b"], on_usage=seen.append)
    await llm.complete([Message.user("x")], role="agent")
    await llm.complete([Message.user("y")], role="judge")
    assert [u.role for u in seen] == ["agent", "judge"]
    total = seen[0] + seen[1]
    assert total.calls == 2
    assert total.total_tokens == sum(u.total_tokens for u in seen)


async def test_malformed_json_is_a_clear_error() -> None:
    llm = ScriptedLLM(["not json {"])
    c = await llm.complete([Message.user("x")])
    with pytest.raises(MalformedResponseError, match="not valid JSON"):
        c.json()


async def test_fenced_json_is_accepted() -> None:
    llm = ScriptedLLM(['```json\n{"a": 1}\n```'])
    assert (await llm.complete([Message.user("x")])).json() == {"a": 1}


async def test_raw_line_breaks_inside_a_json_string_are_accepted() -> None:
    """Qwen copies a passage's line break into a quote verbatim (seen in the PubMedQA run)."""
    llm = ScriptedLLM(['{"choice": "A", "quote": "first line\nsecond line"}'])
    assert (await llm.complete([Message.user("x")])).json()["quote"] == "first line\nsecond line"
