"""Anthropic models through the official SDK (``anthropic:MODEL`` or ``claude-…``).

Structured output uses a forced tool whose input schema is the requested JSON schema: the
SDK validates it server-side, which is sturdier than asking for JSON in prose. Long system
prompts and messages marked ``cache=True`` get ``cache_control`` so repeated prefixes (the
judge's instructions, the evidence block) are billed at the cache rate.

The SDK's own retries are switched off (``max_retries=0``) so that one retry engine
(:mod:`agent.core.retry`) governs every provider and honours ``Retry-After`` the same way.
"""

from __future__ import annotations

import json
import os
from typing import Any

from agent.core.errors import (
    LLMError,
    MalformedResponseError,
    RateLimitError,
    ServiceTimeoutError,
    ServiceUnavailableError,
)
from agent.core.retry import retry_after_seconds
from agent.llm.base import BaseLLM
from agent.llm.types import Completion, JsonSchema, Message, ToolCall, ToolSpec, Usage

__all__ = ["AnthropicLLM"]

_STRUCTURED_TOOL = "respond"
# Anthropic caches prefixes of at least ~1024 tokens; shorter ones are not worth a marker.
_CACHE_MIN_CHARS = 4000


def _cost(model: str, prompt: int, completion: int, cache_read: int, cache_write: int) -> float:
    try:
        import litellm

        p, c = litellm.cost_per_token(
            model=model,
            prompt_tokens=prompt,
            completion_tokens=completion,
            cache_read_input_tokens=cache_read,
            cache_creation_input_tokens=cache_write,
        )
        return float(p + c)
    except Exception:  # an unknown model has no price: report 0 rather than fail the run
        return 0.0


class AnthropicLLM(BaseLLM):
    provider = "anthropic"

    def __init__(self, model: str, *, http_client: Any = None, api_key: str | None = None, **kw: Any) -> None:
        super().__init__(model, **kw)
        if api_key:
            self._credentials = (api_key,)
        import anthropic

        self._client = anthropic.AsyncAnthropic(
            api_key=api_key or os.environ.get("ANTHROPIC_API_KEY"),
            max_retries=0,
            timeout=self.timeout_s,
            http_client=http_client,
        )

    def _payload(
        self, messages: list[Message], json_schema: JsonSchema | None, tools: list[ToolSpec]
    ) -> dict[str, Any]:
        system_blocks: list[dict[str, Any]] = []
        convo: list[dict[str, Any]] = []
        for m in messages:
            if m.role == "system":
                block: dict[str, Any] = {"type": "text", "text": m.content}
                if m.cache or len(m.content) >= _CACHE_MIN_CHARS:
                    block["cache_control"] = {"type": "ephemeral"}
                system_blocks.append(block)
            elif m.role == "tool":
                convo.append(
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": m.tool_call_id,
                                "content": m.content,
                            }
                        ],
                    }
                )
            elif m.role == "assistant" and m.tool_calls:
                content: list[dict[str, Any]] = [{"type": "text", "text": m.content}] if m.content else []
                content += [
                    {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}
                    for c in m.tool_calls
                ]
                convo.append({"role": "assistant", "content": content})
            else:
                text_block: dict[str, Any] = {"type": "text", "text": m.content}
                if m.cache:
                    text_block["cache_control"] = {"type": "ephemeral"}
                convo.append({"role": m.role, "content": [text_block]})
        payload: dict[str, Any] = {"messages": convo}
        if system_blocks:
            payload["system"] = system_blocks
        api_tools = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools
        ]
        if json_schema is not None:
            api_tools = [
                {
                    "name": _STRUCTURED_TOOL,
                    "description": "Return the answer in exactly this structure.",
                    "input_schema": json_schema
                    if json_schema.get("type") == "object"
                    else {
                        "type": "object",
                        "properties": {"value": json_schema},
                        "required": ["value"],
                    },
                }
            ]
            payload["tool_choice"] = {"type": "tool", "name": _STRUCTURED_TOOL}
        if api_tools:
            payload["tools"] = api_tools
        return payload

    async def _complete(
        self,
        messages: list[Message],
        *,
        json_schema: JsonSchema | None,
        tools: list[ToolSpec],
        max_tokens: int,
        temperature: float,
    ) -> Completion:
        import anthropic

        payload = self._payload(messages, json_schema, tools)
        timer = self._timer()
        try:
            # Current Claude models take no sampling temperature; it is left to the API default.
            resp = await self._client.messages.create(model=self.model, max_tokens=max_tokens, **payload)
        except anthropic.RateLimitError as exc:
            raise RateLimitError(
                "rate limited (429)",
                service=self.name,
                retry_after=retry_after_seconds(exc.response.headers),
            ) from exc
        except anthropic.APITimeoutError as exc:
            raise ServiceTimeoutError(f"timed out after {self.timeout_s}s", service=self.name) from exc
        except anthropic.APIConnectionError as exc:
            raise ServiceUnavailableError(f"cannot reach Anthropic: {exc}", service=self.name) from exc
        except anthropic.APIStatusError as exc:
            if exc.status_code >= 500 or exc.status_code == 529:
                raise ServiceUnavailableError(f"server error {exc.status_code}", service=self.name) from exc
            raise LLMError(f"request rejected ({exc.status_code}): {exc.message}", model=self.name) from exc
        except (ValueError, TypeError, KeyError) as exc:
            raise MalformedResponseError(f"unreadable response: {exc}", model=self.name) from exc
        return self._to_completion(resp, json_schema, timer.elapsed)

    def _to_completion(self, resp: Any, json_schema: JsonSchema | None, seconds: float) -> Completion:
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in getattr(resp, "content", None) or []:
            if block.type == "text":
                texts.append(block.text)
            elif block.type == "tool_use":
                calls.append(ToolCall(id=block.id, name=block.name, arguments=dict(block.input or {})))
        if json_schema is not None:
            structured = next((c for c in calls if c.name == _STRUCTURED_TOOL), None)
            if structured is None:
                raise MalformedResponseError("no structured output in the response", model=self.name)
            args = structured.arguments
            value = args if json_schema.get("type") == "object" else args.get("value")
            texts, calls = [json.dumps(value)], []
        elif not texts and not calls:
            raise MalformedResponseError("empty response", model=self.name)
        u = resp.usage
        cache_read = int(getattr(u, "cache_read_input_tokens", 0) or 0)
        cache_write = int(getattr(u, "cache_creation_input_tokens", 0) or 0)
        prompt = int(u.input_tokens) + cache_read + cache_write
        usage = Usage(
            model=self.name,
            prompt_tokens=prompt,
            completion_tokens=int(u.output_tokens),
            cached_prompt_tokens=cache_read,
            cost_usd=_cost(self.model, int(u.input_tokens), int(u.output_tokens), cache_read, cache_write),
            seconds=seconds,
        )
        return Completion(text="".join(texts), tool_calls=calls, finish_reason=resp.stop_reason, usage=usage)
