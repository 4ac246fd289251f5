"""The one exception tree of scholarloop.

Every error a user can meet derives from :class:`ScholarloopError` and says what to fix
(which file, which setting, which environment variable)::

    ScholarloopError
    ├── ConfigError                      bad preset, bad value, unknown setting
    │   └── MissingAPIKeyError           a chosen provider's key is not in the environment
    ├── CorpusError                      unreadable paper, bad index, manifest mismatch
    ├── ServiceError                     a model provider or an online source failed
    │   ├── TransientError               worth retrying after a pause
    │   │   ├── RateLimitError           429; carries ``retry_after`` seconds when the server said
    │   │   ├── ServiceTimeoutError      the request ran out of time
    │   │   └── ServiceUnavailableError  5xx, overloaded, or the connection was reset
    │   ├── LLMError                     a model provider refused or garbled a request
    │   │   ├── ModelRequestsDisabledError  the test switch forbids real model calls
    │   │   ├── ModelNotAvailableError   a local model file is missing or fails its checksum
    │   │   ├── MalformedResponseError   the reply could not be parsed (bad JSON, no content)
    │   │   └── ScriptExhaustedError     a scripted test LLM was asked for more than it was given
    │   └── OnlineError                  an online paper source failed for good
    │       ├── NetworkDownError         DNS or connect failure: the network is unreachable
    │       └── FetchError               a PDF download was refused or failed
    └── ToolError                        a tool failed; the loop reports it to the policy

Retrying is decided by type, in one place (:mod:`agent.core.retry`): only a
:class:`TransientError` is retried, with backoff, whether a model provider or an online source
raised it. :class:`NetworkDownError` is deliberately *not* transient: retrying an unreachable
network only makes the user wait before the local-library fallback.

A tool that raises any :class:`ScholarloopError` does not stop the run: the loop turns it into
an observation for the policy, and only two failed steps in a row end the run. That is why a
caller that wants "the model call failed after its retries" catches :class:`ServiceError`, not
:class:`LLMError`: a rate limit that outlasts its retries is a :class:`RateLimitError`.

``tools.base.ToolRetry`` sits outside this tree on purpose: it is a signal asking the model to
call a tool differently, not an error.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "CorpusError",
    "FetchError",
    "LLMError",
    "MalformedResponseError",
    "MissingAPIKeyError",
    "ModelNotAvailableError",
    "ModelRequestsDisabledError",
    "NetworkDownError",
    "OnlineError",
    "RateLimitError",
    "ScholarloopError",
    "ScriptExhaustedError",
    "ServiceError",
    "ServiceTimeoutError",
    "ServiceUnavailableError",
    "ToolError",
    "TransientError",
]


class ScholarloopError(Exception):
    """Base of every error raised on purpose by scholarloop."""


class ConfigError(ScholarloopError):
    """A preset, setting or override is invalid; the message names it."""


class MissingAPIKeyError(ConfigError):
    """A provider was chosen but its API key is not set.

    Raised when the model is resolved, not at the first request, so a run fails at once.
    """

    def __init__(self, provider: str, env_vars: list[str], model: str) -> None:
        self.provider = provider
        self.env_vars = env_vars
        self.model = model
        names = " or ".join(env_vars) if env_vars else "(unknown variable)"
        super().__init__(
            f"model {model!r} needs an API key for {provider}: set {names} in the environment "
            f"(or choose the offline default with --config local)"
        )


class CorpusError(ScholarloopError):
    """A paper, chunk store or index could not be read or written."""


class ServiceError(ScholarloopError):
    """A model provider or an online source failed.

    ``service`` names who failed (``anthropic:claude-…``, ``Crossref``) and prefixes the message,
    so a log line says which of several configured services to look at.
    """

    def __init__(self, message: str, *, service: str | None = None) -> None:
        self.service = service
        super().__init__(f"[{service}] {message}" if service else message)


class TransientError(ServiceError):
    """A failure worth retrying after a pause; the retry engine retries exactly these."""


class RateLimitError(TransientError):
    """The service answered 429 (or its SDK's equivalent).

    ``retry_after`` is the wait in seconds the server asked for, when it said; the retry engine
    honours it (up to its cap) instead of its own backoff.
    """

    def __init__(self, message: str, *, service: str | None = None, retry_after: float | None = None) -> None:
        self.retry_after = retry_after
        super().__init__(message, service=service)


class ServiceTimeoutError(TransientError):
    """The request did not finish within the configured timeout."""


class ServiceUnavailableError(TransientError):
    """The service returned 5xx, said it was overloaded, or dropped the connection."""


class LLMError(ServiceError):
    """A model provider failed in a way that waiting will not fix (bad request, bad reply)."""

    def __init__(self, message: str, *, model: str | None = None) -> None:
        self.model = model
        super().__init__(message, service=model)


class ModelRequestsDisabledError(LLMError):
    """Real model requests are switched off (``agent.llm.switch``), as they are during tests."""


class ModelNotAvailableError(LLMError):
    """A local model is not installed, incomplete, or fails its checksum."""


class MalformedResponseError(LLMError):
    """The provider answered, but not with something usable."""


class ScriptExhaustedError(LLMError):
    """A scripted test LLM ran out of queued replies: the test asked for more calls than it planned."""


class OnlineError(ServiceError):
    """An online source failed in a way retries did not fix (reported, never fatal to a run)."""


class NetworkDownError(OnlineError):
    """DNS or connect failure: the network is unreachable, so searching falls back to the library."""


class FetchError(OnlineError):
    """A PDF download was refused or failed; the message says why."""


class ToolError(ScholarloopError):
    """A tool failed; the loop reports it to the policy as an observation and goes on."""
