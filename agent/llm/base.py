"""The one ``LLM`` protocol and the base class every provider builds on.

The base class owns what must behave the same for every provider: the network switch,
retries with backoff (honouring ``Retry-After``), a per-provider concurrency limit, and usage
accounting. Providers only implement ``_complete`` (and optionally ``_score_yes``).
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar, runtime_checkable

from agent.core.errors import ModelRequestsDisabled, RateLimitError, TransientLLMError
from agent.llm import switch
from agent.llm.types import Completion, JsonSchema, Message, Role, ToolSpec, Usage, YesNoScore

__all__ = ["LLM", "BaseLLM", "RetryPolicy", "UsageCallback"]

log = logging.getLogger(__name__)

UsageCallback = Callable[[Usage], None]
# The backoff sleep, kept as a module attribute so tests can record waits without sleeping.
_sleep = asyncio.sleep
T = TypeVar("T")


@runtime_checkable
class LLM(Protocol):
    """What every role's model offers. ``name`` is ``provider:model``."""

    name: str

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        role: Role = "other",
        json_schema: JsonSchema | None = None,
        tools: Sequence[ToolSpec] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> Completion: ...

    async def score_yes(self, messages: Sequence[Message], *, role: Role = "judge") -> YesNoScore: ...


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded exponential backoff with jitter; ``Retry-After`` wins when the server sends it."""

    max_retries: int = 3
    base_delay_s: float = 1.0
    max_delay_s: float = 30.0

    def delay(self, attempt: int, exc: Exception) -> float:
        if isinstance(exc, RateLimitError) and exc.retry_after is not None:
            return min(max(exc.retry_after, 0.0), self.max_delay_s)
        backoff = self.base_delay_s * (2**attempt)
        return min(backoff * (0.5 + random.random() / 2), self.max_delay_s)


# One semaphore per (provider, event loop): a limit must hold across every role that shares a
# provider, and asyncio primitives cannot cross loops (``ask()`` may run in a fresh loop).
_SEMAPHORES: dict[tuple[str, int], asyncio.Semaphore] = {}
_SEM_LOCK = threading.Lock()


def _provider_semaphore(provider: str, limit: int) -> asyncio.Semaphore:
    key = (provider, id(asyncio.get_running_loop()))
    with _SEM_LOCK:
        sem = _SEMAPHORES.get(key)
        if sem is None:
            sem = _SEMAPHORES[key] = asyncio.Semaphore(limit)
        return sem


class BaseLLM(ABC):
    """Shared machinery; subclasses implement ``_complete``.

    ``real`` providers (anthropic, litellm, local) obey the global network switch; the test
    doubles set ``real = False``.
    """

    provider: str = "base"
    real: bool = True

    def __init__(
        self,
        model: str,
        *,
        temperature: float = 0.0,
        max_tokens: int = 512,
        timeout_s: float = 120.0,
        retry: RetryPolicy | None = None,
        concurrency: int = 4,
        on_usage: UsageCallback | None = None,
    ) -> None:
        self.model = model
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.timeout_s = timeout_s
        self.retry = retry or RetryPolicy()
        self.concurrency = concurrency
        self.on_usage = on_usage
        self.usage_log: list[Usage] = []

    @property
    def name(self) -> str:
        return f"{self.provider}:{self.model}"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        role: Role = "other",
        json_schema: JsonSchema | None = None,
        tools: Sequence[ToolSpec] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> Completion:
        """Run one completion with retries, the concurrency limit and usage accounting."""
        msgs = list(messages)
        mt = max_tokens if max_tokens is not None else self.max_tokens
        temp = temperature if temperature is not None else self.temperature

        async def call() -> Completion:
            return await self._complete(
                msgs,
                json_schema=json_schema,
                tools=list(tools or []),
                max_tokens=mt,
                temperature=temp,
            )

        completion = await self._with_retries(call)
        completion.usage.role = role
        completion.usage.model = completion.usage.model or self.name
        self._record(completion.usage)
        return completion

    async def score_yes(self, messages: Sequence[Message], *, role: Role = "judge") -> YesNoScore:
        """P("Yes") as the next answer to ``messages`` (which should ask a yes/no question)."""
        msgs = list(messages)
        score = await self._with_retries(lambda: self._score_yes(msgs))
        score.usage.role = role
        score.usage.model = score.usage.model or self.name
        self._record(score.usage)
        return score

    @abstractmethod
    async def _complete(
        self,
        messages: list[Message],
        *,
        json_schema: JsonSchema | None,
        tools: list[ToolSpec],
        max_tokens: int,
        temperature: float,
    ) -> Completion: ...

    async def _score_yes(self, messages: list[Message]) -> YesNoScore:
        """Fallback for providers without logits: a constrained one-word answer, scored 0 or 1."""
        schema: JsonSchema = {
            "type": "object",
            "properties": {"answer": {"type": "string", "enum": ["Yes", "No"]}},
            "required": ["answer"],
        }
        completion = await self._complete(
            messages, json_schema=schema, tools=[], max_tokens=16, temperature=0.0
        )
        try:
            answer = str(completion.json().get("answer", ""))
        except Exception:
            answer = completion.text
        p = 1.0 if answer.strip().lower().startswith("yes") else 0.0
        return YesNoScore(p_yes=p, usage=completion.usage, method="text")

    async def _with_retries(self, call: Callable[[], Awaitable[T]]) -> T:
        if self.real and not switch.model_requests_allowed():
            raise ModelRequestsDisabled(
                "real model requests are disabled (tests set agent.llm.switch); use "
                "agent.llm.testing.ScriptedLLM or FunctionLLM instead",
                model=self.name,
            )
        attempt = 0
        sem = _provider_semaphore(self.provider, self.concurrency)
        while True:
            try:
                async with sem:
                    return await call()
            except TransientLLMError as exc:
                if attempt >= self.retry.max_retries:
                    raise
                wait = self.retry.delay(attempt, exc)
                log.warning("%s: %s; retry %d in %.1fs", self.name, exc, attempt + 1, wait)
                attempt += 1
                await _sleep(wait)

    def _record(self, usage: Usage) -> None:
        self.usage_log.append(usage)
        if self.on_usage is not None:
            self.on_usage(usage)

    @staticmethod
    def _timer() -> _Timer:
        return _Timer()


class _Timer:
    def __init__(self) -> None:
        self.start = time.perf_counter()

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.start
