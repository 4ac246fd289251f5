"""Every other provider through litellm: OpenAI, Gemini, ollama, vLLM, OpenAI-compatible servers.

litellm's own retries are off (``num_retries=0``): the shared engine (:mod:`agent.core.retry`)
retries, honouring ``Retry-After``, so behaviour is the same across providers. Cost comes from
litellm's cost map, loaded from the package (``LITELLM_LOCAL_MODEL_COST_MAP=True``) so import
never fetches it.
"""

from __future__ import annotations

import json
import os
from typing import Any

from agent.core.errors import (
    LLMError,
    MalformedResponseError,
    RateLimitError,
    ServiceError,
    ServiceTimeoutError,
    ServiceUnavailableError,
)
from agent.core.retry import retry_after_seconds
from agent.llm.base import BaseLLM
from agent.llm.types import Completion, JsonSchema, Message, ToolCall, ToolSpec, Usage, YesNoScore

__all__ = ["LiteLLM", "import_litellm"]


def import_litellm() -> Any:
    """Import litellm without its network call for the cost map."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.telemetry = False
    litellm.suppress_debug_info = True
    return litellm


async def _drain_litellm_logging() -> None:
    """Let litellm's background success-logging finish inside this event loop.

    litellm schedules a logging coroutine after every call; when the loop ends first (``ask()``
    runs its own loop) the coroutine is left un-awaited. Draining here costs microseconds.
    """
    import asyncio

    try:
        from litellm.litellm_core_utils.logging_worker import GLOBAL_LOGGING_WORKER
    except ImportError:  # older litellm: nothing to drain
        return
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    try:
        await asyncio.wait_for(GLOBAL_LOGGING_WORKER.flush(), timeout=2.0)
    except (TimeoutError, RuntimeError):
        return


def _messages(messages: list[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "tool":
            out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content})
        elif m.role == "assistant" and m.tool_calls:
            out.append(
                {
                    "role": "assistant",
                    "content": m.content or None,
                    "tool_calls": [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                        }
                        for c in m.tool_calls
                    ],
                }
            )
        else:
            out.append({"role": m.role, "content": m.content})
    return out


def _headers_of(exc: Exception) -> Any:
    # litellm rebuilds ``exc.response`` without headers; the provider's are kept aside.
    headers = getattr(exc, "litellm_response_headers", None)
    if headers:
        return headers
    response = getattr(exc, "response", None)
    return getattr(response, "headers", None) or getattr(exc, "headers", None)


class LiteLLM(BaseLLM):
    provider = "litellm"

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        json_mode: str = "json_schema",
        **kw: Any,
    ) -> None:
        super().__init__(model, **kw)
        self.api_base = api_base
        self.api_key = api_key
        self.json_mode = json_mode
        if api_key is not None:
            # its variable may be named anything (LLAMA_AUTH): the name rule would miss it
            self._credentials = (api_key,)

    @property
    def concurrency_key(self) -> str:
        # a served model's limit protects its server: shared by every role on that URL, and
        # not spent by requests to another server or to a cloud provider
        return f"{self.provider}@{self.api_base}" if self.api_base else self.provider

    async def _call(self, **kwargs: Any) -> Any:
        litellm = import_litellm()
        import openai  # litellm's own dependency, already loaded by it: its errors' base classes

        try:
            result = await litellm.acompletion(
                model=self.model,
                timeout=self.timeout_s,
                num_retries=0,
                api_base=self.api_base,
                **({"api_key": self.api_key} if self.api_key is not None else {}),
                **kwargs,
            )
            await _drain_litellm_logging()
            return result
        except litellm.RateLimitError as exc:
            raise RateLimitError(
                "rate limited (429)",
                service=self.name,
                retry_after=retry_after_seconds(_headers_of(exc)),
            ) from exc
        except litellm.Timeout as exc:
            raise ServiceTimeoutError(f"timed out after {self.timeout_s}s", service=self.name) from exc
        except (
            litellm.APIConnectionError,
            litellm.ServiceUnavailableError,
            litellm.InternalServerError,
        ) as exc:
            raise ServiceUnavailableError(f"provider unavailable: {exc}", service=self.name) from exc
        except litellm.APIError as exc:
            status = getattr(exc, "status_code", 0) or 0
            if status >= 500:
                raise ServiceUnavailableError(f"server error {status}", service=self.name) from exc
            raise LLMError(f"request failed: {exc}", model=self.name) from exc
        except (litellm.AuthenticationError, litellm.BadRequestError, litellm.NotFoundError) as exc:
            raise LLMError(f"request rejected: {exc}", model=self.name) from exc
        except openai.APIError as exc:
            # Statuses litellm has no class of its own for (502, 504, 403, 422 …) arrive as the
            # OpenAI SDK's errors, outside litellm.APIError; unmapped, a proxy's 502 would skip
            # the retries and escape the error tree, ending the run instead of one step.
            status = getattr(exc, "status_code", 0) or 0
            if status >= 500:
                raise ServiceUnavailableError(f"server error {status}: {exc}", service=self.name) from exc
            raise LLMError(f"request failed: {exc}", model=self.name) from exc
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise MalformedResponseError(f"unreadable response: {exc}", model=self.name) from exc

    def _usage(self, resp: Any, seconds: float) -> Usage:
        litellm = import_litellm()
        u = getattr(resp, "usage", None)
        prompt = int(getattr(u, "prompt_tokens", 0) or 0)
        completion = int(getattr(u, "completion_tokens", 0) or 0)
        details = getattr(u, "prompt_tokens_details", None)
        cached = int(getattr(details, "cached_tokens", 0) or 0) if details else 0
        try:
            cost = float(litellm.completion_cost(completion_response=resp, model=self.model))
        except Exception:  # models missing from the cost map (local servers) cost 0
            cost = 0.0
        return Usage(
            model=self.name,
            prompt_tokens=prompt,
            completion_tokens=completion,
            cached_prompt_tokens=cached,
            cost_usd=cost,
            seconds=seconds,
        )

    async def _complete(
        self,
        messages: list[Message],
        *,
        json_schema: JsonSchema | None,
        tools: list[ToolSpec],
        max_tokens: int,
        temperature: float,
    ) -> Completion:
        kwargs: dict[str, Any] = {
            "messages": _messages(messages),
            "max_tokens": max_tokens,
            "temperature": temperature,
        }
        if tools:
            kwargs["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in tools
            ]
        if json_schema is not None and self.json_mode == "json_object":
            # llama-cpp-python's server: its own form, compiled to a grammar like in-process
            kwargs["response_format"] = {"type": "json_object", "schema": json_schema}
        elif json_schema is not None:
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "response", "schema": json_schema},
            }
        timer = self._timer()
        resp = await self._call(**kwargs)
        try:
            choice = resp.choices[0]
            message = choice.message
        except (AttributeError, IndexError, TypeError) as exc:
            raise MalformedResponseError("response has no choices", model=self.name) from exc
        calls: list[ToolCall] = []
        for call in getattr(message, "tool_calls", None) or []:
            try:
                args = json.loads(call.function.arguments or "{}")
            except json.JSONDecodeError as exc:
                raise MalformedResponseError(
                    f"tool call {call.function.name} has invalid JSON arguments", model=self.name
                ) from exc
            calls.append(ToolCall(id=call.id, name=call.function.name, arguments=args))
        text = getattr(message, "content", None) or ""
        if not text and not calls:
            raise MalformedResponseError("empty response", model=self.name)
        return Completion(
            text=text,
            tool_calls=calls,
            finish_reason=choice.finish_reason,
            usage=self._usage(resp, timer.elapsed),
        )

    async def _score_yes(self, messages: list[Message]) -> YesNoScore:
        """Use top logprobs of the first token where the provider returns them."""
        timer = self._timer()
        try:
            resp = await self._call(
                messages=_messages(messages),
                max_tokens=1,
                temperature=0.0,
                logprobs=True,
                top_logprobs=5,
            )
            content = _field(_field(resp.choices[0].logprobs, "content")[0], "top_logprobs")
        except (ServiceError, AttributeError, IndexError, KeyError, TypeError):
            # no logprobs (or the request failed): ask for a one-word answer instead
            return await super()._score_yes(messages)
        import math

        # litellm hands back objects (TopLogprob) from a real server, dicts from some providers
        top = [(_field(t, "token"), float(_field(t, "logprob"))) for t in content]
        yes = sum(math.exp(lp) for token, lp in top if str(token).strip().lower() == "yes")
        no = sum(math.exp(lp) for token, lp in top if str(token).strip().lower() == "no")
        p = yes / (yes + no) if yes + no > 0 else 0.5
        return YesNoScore(p_yes=p, usage=self._usage(resp, timer.elapsed), method="logprobs")


def _field(item: Any, name: str) -> Any:
    """``item.name`` or ``item[name]``: litellm's logprobs are objects or dicts by provider."""
    return item[name] if isinstance(item, dict) else getattr(item, name)
