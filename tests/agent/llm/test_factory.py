import pytest

from agent.core.errors import ConfigError, MissingAPIKeyError
from agent.core.settings import load_settings
from agent.llm.anthropic_provider import AnthropicLLM
from agent.llm.factory import resolve_llm, resolve_role_llms, split_model
from agent.llm.litellm_provider import LiteLLM
from agent.llm.local import LocalLLM


@pytest.mark.parametrize(
    ("spec", "provider", "model"),
    [
        ("local:qwen2.5-coder-1.5b", "local", "qwen2.5-coder-1.5b"),
        ("local/smollm2-135m", "local", "smollm2-135m"),
        ("anthropic:claude-sonnet-4-6", "anthropic", "claude-sonnet-4-6"),
        ("claude-haiku-4-5", "anthropic", "claude-haiku-4-5"),
        ("openai/gpt-4o-mini", "litellm", "openai/gpt-4o-mini"),
        ("litellm:gemini/gemini-2.0-flash", "litellm", "gemini/gemini-2.0-flash"),
        ("ollama/llama3", "litellm", "ollama/llama3"),
    ],
)
def test_model_strings_route_to_providers(spec: str, provider: str, model: str) -> None:
    assert split_model(spec) == (provider, model)


def test_test_models_are_not_resolved_from_settings() -> None:
    with pytest.raises(ConfigError, match="agent.llm.testing"):
        split_model("test:scripted")


def test_missing_anthropic_key_fails_at_once_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(MissingAPIKeyError, match="ANTHROPIC_API_KEY") as info:
        resolve_role_llms(load_settings("anthropic", environ={}))
    assert info.value.env_vars == ["ANTHROPIC_API_KEY"]


def test_missing_openai_key_is_named_by_litellm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(MissingAPIKeyError, match="OPENAI_API_KEY"):
        resolve_llm("openai/gpt-4o-mini", load_settings(environ={}))


def test_keyless_litellm_providers_resolve() -> None:
    assert isinstance(resolve_llm("ollama/llama3", load_settings(environ={})), LiteLLM)


def test_with_keys_present_providers_resolve(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0000")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0000")
    settings = load_settings(environ={})
    assert isinstance(resolve_llm("claude-haiku-4-5", settings), AnthropicLLM)
    assert isinstance(resolve_llm("openai/gpt-4o-mini", settings), LiteLLM)


def test_default_roles_share_one_local_instance() -> None:
    llms = resolve_role_llms(load_settings(environ={}))
    assert set(llms) == {"agent", "summary", "answer", "judge"}
    assert all(isinstance(llm, LocalLLM) for llm in llms.values())
    assert len({id(llm) for llm in llms.values()}) == 1
    assert llms["answer"].concurrency == 1  # llama.cpp is one queue


def test_each_role_can_get_its_own_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0000")
    settings = load_settings(environ={}, llm__judge="local:smollm2-135m", llm__answer="claude-haiku-4-5")
    llms = resolve_role_llms(settings)
    assert llms["judge"].name == "local:smollm2-135m"
    assert llms["answer"].name == "anthropic:claude-haiku-4-5"
    assert llms["agent"].name == "local:qwen2.5-coder-1.5b"


@pytest.mark.parametrize("lazy", [True, False])
def test_lazy_grammar_setting_reaches_the_local_provider(lazy: bool) -> None:
    llm = resolve_llm("local:qwen2.5-coder-1.5b", load_settings(environ={}, llm__local__lazy_grammar=lazy))
    assert isinstance(llm, LocalLLM)
    assert llm.lazy_grammar is lazy
