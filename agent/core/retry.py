"""The one retry engine for every remote call: model providers and online paper sources.

One engine, so that "what is retried, how long we wait, when we give up" is answered the same
way for Anthropic, litellm, Semantic Scholar and Crossref:

* only a :class:`~agent.core.errors.TransientError` is retried (429, timeout, 5xx); anything
  else, :class:`~agent.core.errors.NetworkDownError` included, is raised at once;
* the wait is exponential backoff with jitter, capped, unless the server sent ``Retry-After``,
  which is honoured (up to the same cap, so a server cannot park a run for an hour);
* retries are bounded by :attr:`RetryPolicy.max_retries`.

Callers turn their client's exceptions into the error tree *before* they reach :func:`retry`;
the engine itself knows nothing about HTTP libraries. Waiting goes through the module attribute
``_sleep``, the single hook tests replace to record waits instead of sleeping through them.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

from agent.core.errors import RateLimitError, TransientError

__all__ = ["RetryPolicy", "Sleep", "retry", "retry_after_seconds"]

log = logging.getLogger(__name__)
T = TypeVar("T")
Sleep = Callable[[float], Awaitable[None]]

_sleep: Sleep = asyncio.sleep


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently to retry a transient failure.

    ``max_retries`` counts retries, not attempts (the settings ``llm.max_retries`` and
    ``online.retries`` mean the same), so ``max_retries=0`` is one attempt and no waiting.
    ``jitter`` is the share of each backoff that is randomised: with 0.5 a 4 s backoff becomes
    2-4 s, which keeps parallel callers that failed together from retrying together.
    """

    max_retries: int = 3
    base_delay_s: float = 1.0
    max_delay_s: float = 30.0
    jitter: float = 0.5

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        if self.base_delay_s < 0 or self.max_delay_s < 0:
            raise ValueError("retry delays must be >= 0")
        if not 0.0 <= self.jitter <= 1.0:
            raise ValueError(f"jitter must be between 0 and 1, got {self.jitter}")

    @property
    def attempts(self) -> int:
        """Calls made at most: the first one plus the retries."""
        return self.max_retries + 1

    def delay(self, retries_done: int, exc: BaseException) -> float:
        """Seconds to wait after ``exc`` when ``retries_done`` retries have already been made."""
        if isinstance(exc, RateLimitError) and exc.retry_after is not None:
            return min(max(exc.retry_after, 0.0), self.max_delay_s)
        backoff = min(self.base_delay_s * 2.0**retries_done, self.max_delay_s)
        return backoff * (1.0 - self.jitter * random.random())


async def retry(
    call: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    sleep: Sleep | None = None,
    what: str = "request",
) -> T:
    """Await ``call()`` until it succeeds, retrying :class:`TransientError` as ``policy`` allows.

    The last transient error is re-raised when the retries run out; any other exception is
    raised at once. ``what`` names the call in the warning logged before each wait.
    """
    retries = 0
    while True:
        try:
            return await call()
        except TransientError as exc:
            if retries >= policy.max_retries:
                raise
            wait = policy.delay(retries, exc)
            retries += 1
            log.warning("%s: %s; retry %d of %d in %.1fs", what, exc, retries, policy.max_retries, wait)
            await (sleep or _sleep)(wait)


def retry_after_seconds(headers_or_value: Any, *, now: float | None = None) -> float | None:
    """The wait a server asked for, in seconds; None when it did not say (or said nonsense).

    Takes response headers (any mapping with ``items()``, names matched case-insensitively) or a
    bare ``Retry-After`` value. ``retry-after-ms`` (sent by OpenAI and Anthropic) is preferred
    for its precision; ``Retry-After`` may be seconds or an HTTP-date, which is read against
    ``now`` (default: the clock). A date in the past means "now": 0 seconds.
    """
    if headers_or_value is None or isinstance(headers_or_value, bool):
        return None
    if isinstance(headers_or_value, int | float | str | bytes):
        return _parse_retry_after(headers_or_value, now)
    items = getattr(headers_or_value, "items", None)
    if items is None:
        return None
    lowered = {str(name).lower(): value for name, value in items()}
    milliseconds = _number(lowered.get("retry-after-ms"))
    if milliseconds is not None:
        return milliseconds / 1000.0
    value = lowered.get("retry-after")
    return None if value is None else _parse_retry_after(value, now)


def _number(value: Any) -> float | None:
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return max(number, 0.0) if math.isfinite(number) else None


def _parse_retry_after(value: int | float | str | bytes, now: float | None) -> float | None:
    seconds = _number(value)
    if seconds is not None:
        return seconds
    text = value.decode("latin-1") if isinstance(value, bytes) else str(value)
    try:
        when = parsedate_to_datetime(text.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # "-0000" parses naive; HTTP-dates are always GMT
        when = when.replace(tzinfo=UTC)
    return max(when.timestamp() - (time.time() if now is None else now), 0.0)
