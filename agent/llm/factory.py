"""Turn a model string into a provider instance, failing at once on a missing API key.

Model strings: ``local:NAME`` (or ``local:/path/model.gguf``) → llama.cpp in-process;
``anthropic:MODEL``, ``anthropic/MODEL`` or ``claude-…`` → the Anthropic SDK; ``test:…`` is
refused here (build test doubles directly); anything else goes to litellm, which knows
OpenAI, Gemini, ollama, vLLM and every OpenAI-compatible server.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Literal

from agent.core.errors import ConfigError, MissingAPIKeyError
from agent.core.retry import RetryPolicy
from agent.llm.base import BaseLLM, UsageCallback

if TYPE_CHECKING:
    from agent.core.settings import Settings

__all__ = ["provider_of", "resolve_llm", "resolve_role_llms", "split_model"]

Provider = Literal["local", "anthropic", "litellm"]


def split_model(spec: str) -> tuple[Provider, str]:
    spec = spec.strip()
    if not spec:
        raise ConfigError("empty model string; set llm.default (e.g. 'local:qwen2.5-coder-1.5b')")
    for prefix in ("local:", "local/"):
        if spec.startswith(prefix):
            return "local", spec[len(prefix) :]
    for prefix in ("anthropic:", "anthropic/"):
        if spec.startswith(prefix):
            return "anthropic", spec[len(prefix) :]
    if spec.startswith("claude-"):
        return "anthropic", spec
    if spec.startswith("test:"):
        raise ConfigError(f"{spec!r}: test models are built in code (agent.llm.testing), not from settings")
    return "litellm", spec.removeprefix("litellm:")


def provider_of(spec: str) -> Provider:
    return split_model(spec)[0]


def _check_litellm_key(model: str) -> None:
    from agent.llm.litellm_provider import import_litellm

    litellm = import_litellm()
    try:
        env = litellm.validate_environment(model=model)
    except Exception:  # unknown provider strings: let the first request report it
        return
    # Only secrets count: a missing *_API_BASE has a default (ollama: localhost:11434).
    missing = [
        k
        for k in env.get("missing_keys", [])
        if not os.environ.get(k) and any(w in k for w in ("KEY", "TOKEN", "SECRET"))
    ]
    if missing:
        provider = model.split("/", 1)[0] if "/" in model else "litellm"
        raise MissingAPIKeyError(provider, missing, model)


def resolve_llm(spec: str, settings: Settings, *, on_usage: UsageCallback | None = None) -> BaseLLM:
    """Build the provider for ``spec`` with the shared retry, timeout and concurrency settings."""
    provider, model = split_model(spec)
    cfg = settings.llm
    common: dict[str, Any] = {
        "temperature": cfg.temperature,
        "max_tokens": cfg.max_tokens,
        "timeout_s": cfg.timeout_s,
        "retry": RetryPolicy(max_retries=cfg.max_retries),
        "concurrency": cfg.concurrency,
        "on_usage": on_usage,
    }
    if provider == "local":
        from agent.llm.local import LocalLLM

        return LocalLLM(
            model,
            models_dir=settings.models_dir,
            n_ctx=cfg.local.n_ctx,
            n_threads=cfg.local.n_threads,
            n_gpu_layers=cfg.local.n_gpu_layers,
            seed=cfg.local.seed,
            **common,
        )
    if provider == "anthropic":
        if not os.environ.get("ANTHROPIC_API_KEY"):
            raise MissingAPIKeyError("anthropic", ["ANTHROPIC_API_KEY"], spec)
        from agent.llm.anthropic_provider import AnthropicLLM

        return AnthropicLLM(model, **common)
    _check_litellm_key(model)
    from agent.llm.litellm_provider import LiteLLM

    return LiteLLM(model, **common)


def resolve_role_llms(settings: Settings, *, on_usage: UsageCallback | None = None) -> dict[str, BaseLLM]:
    """One provider per role; roles that share a model string share the instance."""
    by_spec: dict[str, BaseLLM] = {}
    out: dict[str, BaseLLM] = {}
    for role, spec in settings.role_models().items():
        if spec not in by_spec:
            by_spec[spec] = resolve_llm(spec, settings, on_usage=on_usage)
        out[role] = by_spec[spec]
    return out
