"""The local provider with the real SmolLM2-135M GGUF through llama.cpp (offline, ~1 s)."""

import asyncio

import pytest

from agent.core.errors import ModelRequestsDisabledError
from agent.llm import Message, ToolSpec, switch
from agent.llm.local import LocalLLM

pytestmark = pytest.mark.real_model


async def test_chat_counts_real_tokens_at_zero_cost(smollm2: LocalLLM) -> None:
    c = await smollm2.complete(
        [Message.system("You are concise."), Message.user("Name the capital of France.")],
        max_tokens=16,
        role="answer",
    )
    assert c.text.strip()
    assert c.usage.prompt_tokens > 5 and 0 < c.usage.completion_tokens <= 16
    assert c.usage.cost_usd == 0.0 and c.usage.role == "answer"
    assert c.usage.model == "local:smollm2-135m"


async def test_json_mode_is_grammar_constrained(smollm2: LocalLLM) -> None:
    schema = {
        "type": "object",
        "properties": {"score": {"type": "integer"}, "verdict": {"type": "string", "enum": ["yes", "no"]}},
        "required": ["score", "verdict"],
    }
    c = await smollm2.complete(
        [Message.user("Rate this sentence from 0 to 10.")], json_schema=schema, max_tokens=40
    )
    data = c.json()
    assert isinstance(data["score"], int)
    assert data["verdict"] in {"yes", "no"}


async def test_tool_choice_is_constrained_to_known_tools(smollm2: LocalLLM) -> None:
    tools = [
        ToolSpec(
            name="paper_search",
            description="Search papers.",
            parameters={"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
        ),
        ToolSpec(
            name="generate_answer",
            description="Write the answer.",
            parameters={"type": "object", "properties": {}},
        ),
    ]
    c = await smollm2.complete([Message.user("Find papers about EGFR.")], tools=tools, max_tokens=48)
    assert len(c.tool_calls) == 1
    assert c.tool_calls[0].name in {"paper_search", "generate_answer"}


async def test_yes_no_score_comes_from_logits_and_reuses_the_prefix(smollm2: LocalLLM) -> None:
    system = Message.system("You check whether a passage supports a claim. Answer Yes or No.")
    first = await smollm2.score_yes(
        [system, Message.user("Passage: The sky is blue.\nClaim: The sky is blue.")]
    )
    second = await smollm2.score_yes(
        [system, Message.user("Passage: The sky is blue.\nClaim: Grass is red.")]
    )
    for s in (first, second):
        assert 0.0 <= s.p_yes <= 1.0 and s.method == "logits"
    assert second.usage.cached_prompt_tokens >= 10  # the shared system prompt was not re-evaluated


async def test_concurrent_calls_share_one_model_queue(smollm2: LocalLLM) -> None:
    replies = await asyncio.gather(
        *(smollm2.complete([Message.user(f"Say the number {i}.")], max_tokens=8) for i in range(3))
    )
    assert all(r.text for r in replies)
    assert smollm2.loaded() is LocalLLM("smollm2-135m", models_dir=smollm2.models_dir, n_ctx=2048).loaded()


async def test_switch_off_blocks_even_the_local_model(smollm2: LocalLLM) -> None:
    with switch.allow_model_requests(False), pytest.raises(ModelRequestsDisabledError):
        await smollm2.complete([Message.user("hi")])
