"""Turn a model string into a provider instance, failing at once on a missing API key.

Model strings: ``local:NAME`` (or ``local:/path/model.gguf``) → llama.cpp in-process;
``anthropic:MODEL``, ``anthropic/MODEL`` or ``claude-…`` → the Anthropic SDK; ``test:…`` is
refused here (build test doubles directly); anything else goes to litellm, which knows
OpenAI, Gemini, ollama, vLLM and every OpenAI-compatible server.

A served model (``llm.endpoints``) reads ``MODEL@API_BASE``: the form ``Settings.role_models``
gives, so everything that resolves a role's string (runs, ``doctor``, benchmarks) reaches the
same server with the same key and the same shared concurrency limit.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any, Literal

from agent.core.errors import ConfigError, MissingAPIKeyError
from agent.core.retry import RetryPolicy
from agent.llm.base import BaseLLM, UsageCallback

if TYPE_CHECKING:
    from agent.core.settings import EndpointSettings, Settings

__all__ = ["provider_of", "resolve_llm", "resolve_role_llms", "split_endpoint", "split_model"]

Provider = Literal["local", "anthropic", "litellm"]

# Only "@http(s)://" starts an endpoint: litellm model names may hold "@" themselves
# (Vertex AI's "claude-3-5-sonnet@20240620").
_AT_ENDPOINT = re.compile(r"^(?P<model>.+?)@(?P<api_base>https?://\S+)$")
# Sent when a served endpoint names no key: the OpenAI client refuses to send none, and without
# an explicit value litellm would fall back to OPENAI_API_KEY and hand it to a third-party server.
NO_KEY = "sk-no-key-required"


def split_endpoint(spec: str) -> tuple[str, str | None]:
    """``"openai/qwen@http://host:8080/v1"`` → ``("openai/qwen", "http://host:8080/v1")``."""
    match = _AT_ENDPOINT.match(spec.strip())
    if match is None:
        return spec, None
    return match["model"], match["api_base"].rstrip("/")


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


def _find_endpoint(settings: Settings, model: str, api_base: str) -> EndpointSettings | None:
    for endpoint in settings.llm.endpoints.values():
        if endpoint.api_base == api_base and endpoint.model == model:
            return endpoint
    return None


def _served_llm(
    model: str,
    api_base: str,
    endpoint: EndpointSettings | None,
    settings: Settings,
    common: dict[str, Any],
) -> BaseLLM:
    from agent.core.settings import EndpointSettings
    from agent.llm.litellm_provider import LiteLLM

    if endpoint is None:  # "MODEL@URL" written by hand: no key, the URL checked as settings are
        try:
            endpoint = EndpointSettings(api_base=api_base, model=model)
        except ValueError as exc:
            raise ConfigError(f"model {model}@{api_base}: {exc}") from exc
    api_key = NO_KEY
    if endpoint.api_key_env is not None:
        api_key = os.environ.get(endpoint.api_key_env, "")
        if not api_key:
            raise MissingAPIKeyError(
                f"the endpoint {endpoint.api_base}", [endpoint.api_key_env], endpoint.model
            )
    common["concurrency"] = settings.llm.endpoint_concurrency(endpoint.api_base)
    return LiteLLM(
        endpoint.model, api_base=endpoint.api_base, api_key=api_key, json_mode=endpoint.json_mode, **common
    )


def resolve_llm(
    spec: str,
    settings: Settings,
    *,
    on_usage: UsageCallback | None = None,
    endpoint: EndpointSettings | None = None,
) -> BaseLLM:
    """Build the provider for ``spec`` with the shared retry, timeout and concurrency settings.

    ``endpoint`` is the role's served endpoint when the caller knows it; otherwise a
    ``MODEL@API_BASE`` spec is matched to ``llm.endpoints`` for its key and limit.
    """
    base_spec, api_base = split_endpoint(spec)
    provider, model = split_model(base_spec)
    cfg = settings.llm
    common: dict[str, Any] = {
        "temperature": cfg.temperature,
        "max_tokens": cfg.max_tokens,
        "timeout_s": cfg.timeout_s,
        "retry": RetryPolicy(max_retries=cfg.max_retries),
        "concurrency": cfg.concurrency,
        "on_usage": on_usage,
    }
    if api_base is not None:
        if provider != "litellm":
            raise ConfigError(f"{spec!r}: only litellm models can be served from an api_base")
        served = endpoint or _find_endpoint(settings, model, api_base)
        return _served_llm(model, api_base, served, settings, common)
    if provider == "local":
        from agent.llm.local import LocalLLM

        return LocalLLM(
            model,
            models_dir=settings.models_dir,
            n_ctx=cfg.local.n_ctx,
            n_threads=cfg.local.n_threads,
            n_gpu_layers=cfg.local.n_gpu_layers,
            seed=cfg.local.seed,
            lazy_grammar=cfg.local.lazy_grammar,
            extra_buffers=cfg.local.extra_buffers,
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
    """One provider per role; roles that share a model string (and endpoint) share the instance.

    Roles on one server share its concurrency limit either way: the limit is keyed by api_base.
    """
    by_spec: dict[tuple[str, str | None], BaseLLM] = {}
    out: dict[str, BaseLLM] = {}
    for role, spec in settings.role_models().items():
        endpoint = settings.llm.endpoint_for(role)
        # two roles on one URL and model may still name different key variables
        key = (spec, endpoint.api_key_env if endpoint is not None else None)
        if key not in by_spec:
            by_spec[key] = resolve_llm(spec, settings, on_usage=on_usage, endpoint=endpoint)
        out[role] = by_spec[key]
    return out
