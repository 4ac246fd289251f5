"""The local provider with the real SmolLM2-135M GGUF through llama.cpp (offline, ~1 s)."""

import asyncio
import json

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


TOOLS = [
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


async def test_tool_choice_is_constrained_to_known_tools(smollm2: LocalLLM) -> None:
    c = await smollm2.complete([Message.user("Find papers about EGFR.")], tools=TOOLS, max_tokens=48)
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


async def test_lazy_grammar_writes_the_reply_the_full_grammar_writes(smollm2: LocalLLM) -> None:
    """Greedy decoding that checks only the model's own pick must equal the per-vocabulary pass."""
    schema = {
        "type": "object",
        "properties": {
            "summary": {"type": "string", "maxLength": 60},
            "score": {"type": "integer", "minimum": 0, "maximum": 10},
            "label": {"type": "string", "enum": ["relevant", "irrelevant"]},
        },
        "required": ["summary", "score", "label"],
    }
    messages = [
        Message.system("Summarise the passage for the question in JSON."),
        Message.user("Question: What colour is the sky?\nPassage: On a clear day the sky is blue."),
    ]
    replies = {}
    for lazy in (False, True):
        smollm2.lazy_grammar = lazy
        smollm2.loaded().llama.reset()
        replies[lazy] = await smollm2.complete(messages, json_schema=schema, max_tokens=60)
    smollm2.lazy_grammar = True
    assert replies[True].text == replies[False].text and replies[True].text
    assert replies[True].finish_reason == replies[False].finish_reason
    assert replies[True].usage.completion_tokens == replies[False].usage.completion_tokens
    assert replies[True].usage.prompt_tokens == replies[False].usage.prompt_tokens
    if replies[True].finish_reason == "stop":
        assert replies[True].json()["label"] in {"relevant", "irrelevant"}


async def test_lazy_grammar_makes_the_tool_choice_the_full_grammar_makes(smollm2: LocalLLM) -> None:
    calls = {}
    for lazy in (False, True):
        smollm2.lazy_grammar = lazy
        smollm2.loaded().llama.reset()
        c = await smollm2.complete([Message.user("Find papers about EGFR.")], tools=TOOLS, max_tokens=48)
        calls[lazy] = [(t.name, t.arguments) for t in c.tool_calls]
    smollm2.lazy_grammar = True
    assert calls[True] == calls[False] and len(calls[True]) == 1


def test_lazy_decoder_runs_the_full_pass_when_the_pick_is_refused(smollm2: LocalLLM) -> None:
    """A schema the model would never write unprompted forces refusals; every token still obeys it."""
    from agent.llm.local_decode import decode_json, schema_grammar

    llama = smollm2.loaded().llama
    prompt = llama.tokenize(b"Write a haiku about the sea.\n", add_bos=True, special=True)
    schema = {"type": "object", "properties": {"n": {"type": "integer", "enum": [7, 42]}}, "required": ["n"]}
    decoded = decode_json(llama, prompt, schema_grammar(schema), max_tokens=20)
    assert decoded.full_passes >= 1
    assert decoded.finish_reason == "stop"
    assert json.loads(decoded.text) in ({"n": 7}, {"n": 42})
    assert decoded.prompt_tokens == len(prompt) and decoded.evaluated >= 1


def test_a_schema_the_converter_refuses_falls_back_to_plain_json() -> None:
    """llama-cpp-python's sampler constrains such a reply to any JSON; the lazy path must too."""
    pytest.importorskip("llama_cpp")
    from llama_cpp.llama_grammar import JSON_GBNF

    from agent.llm.local_decode import schema_grammar

    assert schema_grammar({"type": "object", "properties": {"x": {"$ref": "#/nowhere"}}}) == JSON_GBNF
    assert schema_grammar({"type": "object", "properties": {"x": {"type": "integer"}}}) != JSON_GBNF


async def test_a_prompt_longer_than_the_context_is_refused_on_both_paths(smollm2: LocalLLM) -> None:
    """Decoding and Yes/No scoring share one check; the error names the model and evaluates nothing."""
    from agent.core.errors import MalformedResponseError

    long = [Message.user("word " * 2100)]  # the fixture's context holds 2,048 tokens
    with pytest.raises(MalformedResponseError, match="exceeds n_ctx=2048") as decoding:
        await smollm2.complete(long, json_schema={"type": "object"}, max_tokens=8)
    with pytest.raises(MalformedResponseError, match="exceeds n_ctx=2048") as scoring:
        await smollm2.score_yes(long)
    assert decoding.value.model == scoring.value.model == "local:smollm2-135m"
