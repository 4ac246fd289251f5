"""The one ``LLM`` protocol and the base class every provider builds on.

The base class owns what must behave the same for every provider: the network switch,
retries (the shared engine in :mod:`agent.core.retry`), a per-provider concurrency limit,
usage accounting, and keeping API keys out of error messages. Providers only implement
``_complete`` (and optionally ``_score_yes``), and turn their SDK's failures into the error
tree so the engine knows what is transient.
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
import time
import traceback
import weakref
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, TypeVar, runtime_checkable

from agent.core.errors import LLMError, ModelRequestsDisabledError, ScholarloopError
from agent.core.retry import RetryPolicy, retry
from agent.llm import switch
from agent.llm.types import Completion, JsonSchema, Message, Role, ToolSpec, Usage, YesNoScore

__all__ = ["LLM", "BaseLLM", "UsageCallback"]

UsageCallback = Callable[[Usage], None]
T = TypeVar("T")

# Environment variables whose values are credentials (OPENAI_API_KEY, HF_TOKEN, …); values
# shorter than this are flags or placeholders, and replacing them would garble messages.
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL", re.IGNORECASE)
_MIN_SECRET_LEN = 8


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


# One semaphore per (concurrency key, event loop): a limit must hold across every role that
# shares a provider, or a served model's server (``BaseLLM.concurrency_key``), and asyncio
# primitives cannot cross loops (``ask()`` may run in a fresh loop). Keyed by the loop object,
# weakly: a loop's id can be reused once it is gone, and a stale semaphore from a dead loop
# would then hand the new one the wrong limit.
_SEMAPHORES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Semaphore]] = (
    weakref.WeakKeyDictionary()
)
_SEM_LOCK = threading.Lock()


def _provider_semaphore(key: str, limit: int) -> asyncio.Semaphore:
    loop = asyncio.get_running_loop()
    with _SEM_LOCK:
        per_loop = _SEMAPHORES.setdefault(loop, {})
        sem = per_loop.get(key)
        if sem is None:
            sem = per_loop[key] = asyncio.Semaphore(limit)
        return sem


class BaseLLM(ABC):
    """Shared machinery; subclasses implement ``_complete``.

    ``real`` providers (anthropic, litellm, local) obey the global network switch; the test
    doubles set ``real = False``.
    """

    provider: str = "base"
    real: bool = True
    # keys handed to the constructor rather than read from the environment (see _scrubbed)
    _credentials: tuple[str, ...] = ()

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

    @property
    def concurrency_key(self) -> str:
        """What the concurrency limit is shared by: the provider, unless a subclass knows better."""
        return self.provider

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

    def _secrets(self) -> dict[str, str]:
        """Credential values this provider may send, by the name shown in their place."""
        found = {
            value: f"[{name} redacted]"
            for name, value in os.environ.items()
            if _SECRET_NAME.search(name) and len(value) >= _MIN_SECRET_LEN
        }
        for value in self._credentials:
            found.setdefault(value, "[api key redacted]")
        return found

    def _scrubbed(self, exc: Exception) -> Exception:
        """``exc`` with no credential in its message or its chain of causes.

        Providers build messages from what the server said, and some OpenAI-compatible
        servers echo the key they were sent ("Incorrect API key provided: sk-…"). The message
        reaches the retry log, the run's trace, saved answers and ``-v`` tracebacks, so it is
        cleaned here, before any of them sees it. When the SDK's own exception (the cause)
        carries the key, the chain is cut: its text cannot be edited safely.
        """
        secrets = self._secrets()
        if not secrets:
            return exc
        text = "".join(traceback.format_exception(exc))
        if not any(value in text for value in secrets):
            return exc

        def clean(message: str) -> str:
            for value, label in secrets.items():
                message = message.replace(value, label)
            return message

        if not isinstance(exc, ScholarloopError):  # a foreign error's fields cannot be rewritten
            exc = LLMError(clean(f"{type(exc).__name__}: {exc}"), model=self.name)
        exc.args = tuple(clean(a) if isinstance(a, str) else a for a in exc.args)
        exc.__cause__ = None
        exc.__context__ = None
        exc.__suppress_context__ = True
        return exc

    async def _with_retries(self, call: Callable[[], Awaitable[T]]) -> T:
        if self.real and not switch.model_requests_allowed():
            raise ModelRequestsDisabledError(
                "real model requests are disabled (tests set agent.llm.switch); use "
                "agent.llm.testing.ScriptedLLM or FunctionLLM instead",
                model=self.name,
            )
        sem = _provider_semaphore(self.concurrency_key, self.concurrency)

        async def limited() -> T:
            # the slot is held for the request only, never across a backoff wait
            async with sem:
                try:
                    return await call()
                except Exception as exc:
                    scrubbed = self._scrubbed(exc)
                    if scrubbed is exc:
                        raise
                    raise scrubbed from None

        return await retry(limited, self.retry, what=self.name)

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
