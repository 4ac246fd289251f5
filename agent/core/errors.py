"""The one exception tree of scholarloop.

Every error a user can meet derives from :class:`ScholarloopError` and says what to fix
(which file, which setting, which environment variable)::

    ScholarloopError
    ├── ConfigError                 bad preset, bad value, unknown setting
    │   └── MissingAPIKeyError      a chosen provider's key is not in the environment
    ├── CorpusError                 unreadable paper, bad index, manifest mismatch
    ├── LLMError                    anything a model provider did wrong
    │   ├── ModelRequestsDisabled   the test switch forbids real model calls
    │   ├── ModelNotAvailableError  a local model file is missing or fails its checksum
    │   ├── RateLimitError          429; carries ``retry_after`` seconds when the server said
    │   ├── ProviderTimeoutError    the request ran out of time
    │   ├── ProviderUnavailableError  5xx / connection failure
    │   ├── MalformedResponseError  the reply could not be parsed (bad JSON, no content)
    │   └── ScriptExhaustedError    a scripted test LLM was asked for more than it was given
    ├── ToolError                   a tool failed in a way the agent cannot recover from
    └── RunError                    the agent loop itself failed (budget misuse, bad state)

Retrying is decided by type: :class:`RateLimitError`, :class:`ProviderTimeoutError` and
:class:`ProviderUnavailableError` are *transient* and retried with backoff; the rest are not.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "CorpusError",
    "LLMError",
    "MalformedResponseError",
    "MissingAPIKeyError",
    "ModelNotAvailableError",
    "ModelRequestsDisabled",
    "ProviderTimeoutError",
    "ProviderUnavailableError",
    "RateLimitError",
    "RunError",
    "ScholarloopError",
    "ScriptExhaustedError",
    "ToolError",
    "TransientLLMError",
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


class LLMError(ScholarloopError):
    """A model provider failed."""

    def __init__(self, message: str, *, model: str | None = None) -> None:
        self.model = model
        super().__init__(f"[{model}] {message}" if model else message)


class ModelRequestsDisabled(LLMError):
    """Real model requests are switched off (``agent.llm.ALLOW_MODEL_REQUESTS = False``)."""


class ModelNotAvailableError(LLMError):
    """A local model is not installed, incomplete, or fails its checksum."""


class TransientLLMError(LLMError):
    """A failure worth retrying after a pause."""


class RateLimitError(TransientLLMError):
    """The provider answered 429 (or its SDK's equivalent)."""

    def __init__(self, message: str, *, model: str | None = None, retry_after: float | None = None) -> None:
        self.retry_after = retry_after
        super().__init__(message, model=model)


class ProviderTimeoutError(TransientLLMError):
    """The request did not finish within the configured timeout."""


class ProviderUnavailableError(TransientLLMError):
    """The provider returned 5xx or could not be reached."""


class MalformedResponseError(LLMError):
    """The provider answered, but not with something usable."""


class ScriptExhaustedError(LLMError):
    """A scripted test LLM ran out of queued replies: the test asked for more calls than it planned."""


class ToolError(ScholarloopError):
    """A tool failed and the failure should stop the run."""


class RunError(ScholarloopError):
    """The agent loop failed."""
