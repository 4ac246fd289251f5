"""Test doubles shipped with the package, so users can test code built on scholarloop too.

* :class:`ScriptedLLM` replays queued replies in order and records every request; it fails
  loudly (``ScriptExhaustedError``) when a test asks for more than it scripted.
* :class:`FunctionLLM` lets a Python function decide each reply from the request.

Neither touches the network, and both go through the same base class as real providers, so
usage accounting, retries and role labels are exercised exactly as in production.
"""

from __future__ import annotations

import inspect
import itertools
import json
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from agent.core.errors import ScriptExhaustedError
from agent.llm.base import BaseLLM
from agent.llm.types import Completion, JsonSchema, Message, ToolCall, ToolSpec, Usage, YesNoScore

__all__ = ["FunctionLLM", "Reply", "Request", "ScriptedLLM", "tool_call"]


@dataclass
class Request:
    """What a test double was sent, for assertions."""

    kind: str  # "complete" or "score_yes"
    messages: list[Message]
    json_schema: JsonSchema | None = None
    tools: list[ToolSpec] = field(default_factory=list)
    max_tokens: int | None = None

    @property
    def prompt(self) -> str:
        """All message contents joined: handy for ``assert "..." in request.prompt``."""
        return "\n".join(m.content for m in self.messages)


# A reply is text, a dict (sent as JSON), a tool call or list of them, a full Completion,
# a float (a P(Yes) for score_yes), or an exception instance to raise.
Reply = str | dict[str, Any] | ToolCall | list[ToolCall] | Completion | float | BaseException

_ids = itertools.count(1)


def tool_call(name: str, **arguments: Any) -> ToolCall:
    """Build a ``ToolCall`` for a script: ``tool_call("paper_search", query="EGFR")``."""
    return ToolCall(id=f"call_{next(_ids)}", name=name, arguments=arguments)


def _estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4) if text else 0


def _to_completion(reply: Reply, messages: list[Message], model: str) -> Completion:
    if isinstance(reply, BaseException):
        raise reply
    prompt_tokens = sum(_estimate_tokens(m.content) for m in messages)
    if isinstance(reply, Completion):
        return reply
    if isinstance(reply, ToolCall):
        reply = [reply]
    if isinstance(reply, list):
        return Completion(
            tool_calls=reply,
            finish_reason="tool_calls",
            usage=Usage(model=model, prompt_tokens=prompt_tokens, completion_tokens=10),
        )
    if isinstance(reply, dict):
        text = json.dumps(reply)
    elif isinstance(reply, float):
        text = "Yes" if reply >= 0.5 else "No"
    else:
        text = reply
    return Completion(
        text=text,
        finish_reason="stop",
        usage=Usage(model=model, prompt_tokens=prompt_tokens, completion_tokens=_estimate_tokens(text)),
    )


def _score_from_reply(reply: Reply, messages: list[Message], model: str) -> YesNoScore:
    """A number is P(Yes) as if read from logits; text is read as a Yes/No answer."""
    if isinstance(reply, BaseException):
        raise reply
    usage = Usage(model=model, prompt_tokens=sum(_estimate_tokens(m.content) for m in messages))
    if isinstance(reply, bool | int | float):
        return YesNoScore(p_yes=float(reply), usage=usage, method="logits")
    text = _to_completion(reply, messages, model).text
    return YesNoScore(
        p_yes=1.0 if text.strip().lower().startswith("yes") else 0.0, usage=usage, method="text"
    )


class ScriptedLLM(BaseLLM):
    """Replays ``replies`` in order; ``enqueue`` adds more; ``requests`` records every call."""

    provider = "test"
    real = False

    def __init__(self, replies: Iterable[Reply] = (), *, model: str = "scripted", **kw: Any):
        super().__init__(model, **kw)
        self.queue: deque[Reply] = deque(replies)
        self.requests: list[Request] = []

    def enqueue(self, *replies: Reply) -> ScriptedLLM:
        self.queue.extend(replies)
        return self

    @property
    def remaining(self) -> int:
        return len(self.queue)

    def _next(self, request: Request) -> Reply:
        self.requests.append(request)
        if not self.queue:
            raise ScriptExhaustedError(
                f"script ran out after {len(self.requests) - 1} replies; unexpected "
                f"{request.kind} call whose last message was: {request.messages[-1].content[:200]!r}",
                model=self.name,
            )
        return self.queue.popleft()

    async def _complete(
        self,
        messages: list[Message],
        *,
        json_schema: JsonSchema | None,
        tools: list[ToolSpec],
        max_tokens: int,
        temperature: float,
    ) -> Completion:
        req = Request("complete", messages, json_schema, tools, max_tokens)
        return _to_completion(self._next(req), messages, self.name)

    async def _score_yes(self, messages: list[Message]) -> YesNoScore:
        return _score_from_reply(self._next(Request("score_yes", messages)), messages, self.name)


ReplyFunction = Callable[[Request], Reply | Awaitable[Reply]]


class FunctionLLM(BaseLLM):
    """Each reply is ``function(request)`` (sync or async), e.g. keyed on the prompt's content.

    ``score_function`` decides ``score_yes``; without it, the reply function is asked and its
    text read as Yes/No.
    """

    provider = "test"
    real = False

    def __init__(
        self,
        function: ReplyFunction,
        *,
        score_function: Callable[[Request], float] | None = None,
        model: str = "function",
        **kw: Any,
    ) -> None:
        super().__init__(model, **kw)
        self.function = function
        self.score_function = score_function
        self.requests: list[Request] = []

    async def _call(self, request: Request) -> Reply:
        self.requests.append(request)
        out = self.function(request)
        if inspect.isawaitable(out):
            out = await out
        return out

    async def _complete(
        self,
        messages: list[Message],
        *,
        json_schema: JsonSchema | None,
        tools: list[ToolSpec],
        max_tokens: int,
        temperature: float,
    ) -> Completion:
        req = Request("complete", messages, json_schema, tools, max_tokens)
        return _to_completion(await self._call(req), messages, self.name)

    async def _score_yes(self, messages: list[Message]) -> YesNoScore:
        req = Request("score_yes", messages)
        usage = Usage(model=self.name, prompt_tokens=sum(_estimate_tokens(m.content) for m in messages))
        if self.score_function is not None:
            self.requests.append(req)
            return YesNoScore(p_yes=float(self.score_function(req)), usage=usage, method="logits")
        return _score_from_reply(await self._call(req), messages, self.name)
