"""Models on served OpenAI-compatible endpoints (``llm.endpoints``), per role, through litellm.

Settings are checked as a user writes them (presets, environment, keyword overrides); the
factory is checked over real loopback sockets against ``fault_server``: each role reaches the
server at its own api_base with the key from the variable it names, and the concurrency limit
belongs to the server: roles on one api_base share it, roles on two servers do not.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

import pytest

from agent.core.errors import ConfigError, LLMError, MissingAPIKeyError
from agent.core.settings import EndpointSettings, Settings, load_settings
from agent.llm import Message, switch
from agent.llm.base import BaseLLM
from agent.llm.factory import NO_KEY, resolve_llm, resolve_role_llms
from agent.llm.litellm_provider import LiteLLM
from agent.llm.local import LocalLLM
from tests.agent.llm.fault_server import Fault, FaultServer, running_fault_server
from tests.conftest import REPO

SERVED = "http://127.0.0.1:8080/v1"
KEY = "served-key-0001"
DELAY_S = 0.15  # long enough for every request the limit lets through to overlap


def endpoint(api_base: str, model: str = "openai/qwen", **extra: Any) -> dict[str, Any]:
    return {"api_base": api_base, "model": model, **extra}


def settings_with(**endpoints: dict[str, Any]) -> Settings:
    return load_settings(environ={}, llm__endpoints=endpoints, llm__max_retries=0)


# --- settings ----------------------------------------------------------------------------------


def test_the_served_preset_points_every_role_at_one_local_server() -> None:
    settings = load_settings("served", environ={})
    assert set(settings.role_models().values()) == {f"openai/qwen2.5-coder-1.5b@{SERVED}"}
    assert settings.llm.endpoint_concurrency(SERVED) == 1
    # the preset says how to start the server it expects
    assert (
        "python -m llama_cpp.server --model <gguf> --port 8080"
        in (REPO / "configs" / "served.toml").read_text()
    )


def test_the_served_preset_resolves_to_litellm_at_its_api_base() -> None:
    llms = resolve_role_llms(load_settings("served", environ={}))
    assert len({id(llm) for llm in llms.values()}) == 1  # one model, one server: one instance
    llm = llms["answer"]
    assert isinstance(llm, LiteLLM)
    assert (llm.model, llm.api_base, llm.concurrency) == ("openai/qwen2.5-coder-1.5b", SERVED, 1)


def test_environment_overrides_reach_endpoints() -> None:
    env = {
        "SCHOLARLOOP_LLM__ENDPOINTS__JUDGE__API_BASE": "http://10.0.0.5:8000/v1/",
        "SCHOLARLOOP_LLM__ENDPOINTS__JUDGE__MODEL": "openai/judge-7b",
        "SCHOLARLOOP_LLM__ENDPOINTS__JUDGE__API_KEY_ENV": "JUDGE_SERVER_KEY",
        "SCHOLARLOOP_LLM__ENDPOINTS__JUDGE__MAX_CONCURRENCY": "8",
    }
    settings = load_settings("served", environ=env)
    judge = settings.llm.endpoints["judge"]
    assert judge == EndpointSettings(
        api_base="http://10.0.0.5:8000/v1",  # the trailing slash dropped: one spelling per server
        model="openai/judge-7b",
        api_key_env="JUDGE_SERVER_KEY",
        max_concurrency=8,
    )
    assert settings.role_models()["judge"] == "openai/judge-7b@http://10.0.0.5:8000/v1"
    assert settings.role_models()["answer"] == f"openai/qwen2.5-coder-1.5b@{SERVED}"  # default kept


def test_a_role_model_string_beats_the_default_endpoint_and_its_own_endpoint_beats_both() -> None:
    settings = load_settings(
        environ={},
        llm__judge="local:smollm2-135m",
        llm__summary="ollama/llama3",
        llm__endpoints={"default": endpoint(SERVED), "summary": endpoint("http://127.0.0.1:9000/v1")},
    )
    assert settings.role_models() == {
        "agent": f"openai/qwen@{SERVED}",
        "summary": "openai/qwen@http://127.0.0.1:9000/v1",
        "answer": f"openai/qwen@{SERVED}",
        "judge": "local:smollm2-135m",
    }
    assert isinstance(resolve_role_llms(settings)["judge"], LocalLLM)


def test_existing_presets_have_no_endpoints() -> None:
    for preset in ("default", "local", "anthropic", "fast", "high_quality", "litqa2"):
        assert load_settings(preset, environ={}).llm.endpoints == {}


BAD = [
    pytest.param({"api_base": "127.0.0.1:8080/v1"}, "llm.endpoints.summary.api_base", "http", id="no-scheme"),
    pytest.param({"api_base": "ftp://127.0.0.1/v1"}, "llm.endpoints.summary.api_base", "http", id="ftp"),
    pytest.param({"api_base": "http:///v1"}, "llm.endpoints.summary.api_base", "host", id="no-host"),
    pytest.param(
        {"api_base": "http://127.0.0.1:80x/v1"}, "llm.endpoints.summary.api_base", "port", id="bad-port"
    ),
    pytest.param(
        {"api_base": "http://me:pw@127.0.0.1/v1"},
        "llm.endpoints.summary.api_base",
        "credentials",
        id="userinfo",
    ),
    pytest.param({"api_base": "http://h/v1?key=1"}, "llm.endpoints.summary.api_base", "query", id="query"),
    pytest.param({"model": "qwen"}, "llm.endpoints.summary.model", "openai/", id="no-provider-prefix"),
    pytest.param({"model": "local:qwen"}, "llm.endpoints.summary.model", "litellm", id="local-model"),
    pytest.param({"max_concurrency": 0}, "llm.endpoints.summary.max_concurrency", "greater", id="zero-limit"),
    pytest.param({"api_key": "MY_KEY"}, "llm.endpoints.summary.api_key", "not permitted", id="typo"),
]


@pytest.mark.parametrize(("change", "setting", "message"), BAD)
def test_bad_endpoint_values_name_the_setting(change: dict[str, Any], setting: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        settings_with(summary={**endpoint(SERVED), **change})
    assert setting in str(info.value)


def test_a_key_pasted_for_its_variable_name_is_refused_without_echoing_it() -> None:
    pasted = "sk-live-do-not-print-0042"
    with pytest.raises(ConfigError, match="NAME of an environment variable") as info:
        settings_with(summary=endpoint(SERVED, api_key_env=pasted))
    assert "llm.endpoints.summary.api_key_env" in str(info.value)
    assert pasted not in str(info.value)


def test_an_unknown_role_is_refused() -> None:
    with pytest.raises(ConfigError, match="llm.endpoints.sumary: unknown role"):
        settings_with(sumary=endpoint(SERVED))


def test_one_server_gets_one_limit() -> None:
    with pytest.raises(ConfigError, match="llm.endpoints.judge.max_concurrency is 3.*summary"):
        settings_with(summary=endpoint(SERVED, max_concurrency=2), judge=endpoint(SERVED, max_concurrency=3))
    # left unset, a role takes the limit another endpoint gives its server
    settings = settings_with(summary=endpoint(SERVED, max_concurrency=2), judge=endpoint(f"{SERVED}/"))
    assert settings.llm.endpoint_concurrency(SERVED) == 2
    assert settings.llm.endpoint_concurrency("http://127.0.0.1:9/v1") == settings.llm.concurrency


# --- the factory, against loopback servers ---------------------------------------------------------


@pytest.fixture
def server() -> Iterator[FaultServer]:
    with running_fault_server() as srv, switch.allow_model_requests():
        yield srv


async def ask(llm: BaseLLM) -> str:
    return (await llm.complete([Message.user("Which inhibitor remains active against T790M?")])).text


async def test_a_role_reaches_its_server_with_the_key_from_the_named_variable(
    server: FaultServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_SERVER_KEY", KEY)
    server.default = {"kind": "ok", "content": "osimertinib"}
    llms = resolve_role_llms(settings_with(summary=endpoint(server.api_base, api_key_env="MY_SERVER_KEY")))
    assert isinstance(llms["agent"], LocalLLM)  # the other roles keep the default model
    assert await ask(llms["summary"]) == "osimertinib"
    [request] = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.body["model"] == "qwen"  # litellm's "openai/" prefix is not sent


async def test_without_a_key_variable_the_openai_key_is_never_sent(
    server: FaultServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-not-for-this-server")
    llm = resolve_role_llms(settings_with(default=endpoint(server.api_base)))["answer"]
    await ask(llm)
    assert server.requests[0].headers["authorization"] == f"Bearer {NO_KEY}"


def test_an_unset_key_variable_fails_at_once_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MY_SERVER_KEY", raising=False)
    with pytest.raises(MissingAPIKeyError, match="MY_SERVER_KEY") as info:
        resolve_role_llms(settings_with(judge=endpoint(SERVED, api_key_env="MY_SERVER_KEY")))
    assert info.value.env_vars == ["MY_SERVER_KEY"] and SERVED in str(info.value)


async def test_the_printed_role_string_resolves_to_the_same_server_and_key(
    server: FaultServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``doctor`` and the benchmarks resolve ``role_models()`` strings, not roles."""
    monkeypatch.setenv("MY_SERVER_KEY", KEY)
    settings = settings_with(judge=endpoint(server.api_base, api_key_env="MY_SERVER_KEY", max_concurrency=3))
    llm = resolve_llm(settings.role_models()["judge"], settings)
    assert isinstance(llm, LiteLLM) and llm.concurrency == 3
    await ask(llm)
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"


async def test_a_key_echoed_by_the_server_is_redacted_whatever_its_variable_is_called(
    server: FaultServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SERVED_AUTH", KEY)  # a name the secret-name rule would not catch
    server.default = {"kind": "status", "code": 401, "echo_key": True}
    llm = resolve_role_llms(settings_with(answer=endpoint(server.api_base, api_key_env="SERVED_AUTH")))[
        "answer"
    ]
    with pytest.raises(LLMError) as info:
        await ask(llm)
    assert KEY not in str(info.value) and "redacted" in str(info.value)


@dataclass
class Meter:
    """Requests in the servers' hands at once: per server, and over all of them together."""

    delay_s: float = DELAY_S
    lock: threading.Lock = field(default_factory=threading.Lock)
    now: dict[str, int] = field(default_factory=dict)
    peak: dict[str, int] = field(default_factory=dict)

    def route(self, name: str) -> Any:
        def handle(body: dict[str, Any]) -> Fault:
            for key in (name, "all"):
                with self.lock:
                    self.now[key] = self.now.get(key, 0) + 1
                    self.peak[key] = max(self.peak.get(key, 0), self.now[key])
            time.sleep(self.delay_s)  # the handler's own thread: the other requests go on
            with self.lock:
                for key in (name, "all"):
                    self.now[key] -= 1
            return {"kind": "ok", "content": "ok"}

        return handle


@pytest.fixture
def meter() -> Meter:
    return Meter()


@pytest.fixture
def two_servers(meter: Meter) -> Iterator[tuple[FaultServer, FaultServer]]:
    with ExitStack() as stack:
        a = stack.enter_context(running_fault_server(route=meter.route("a")))
        b = stack.enter_context(running_fault_server(route=meter.route("b")))
        stack.enter_context(switch.allow_model_requests())
        yield a, b


async def burst(llms: dict[str, BaseLLM], roles: tuple[str, ...], per_role: int = 4) -> None:
    async with asyncio.TaskGroup() as group:
        for role in roles:
            for _ in range(per_role):
                group.create_task(ask(llms[role]))


async def test_two_roles_on_one_server_share_its_limit(
    two_servers: tuple[FaultServer, FaultServer], meter: Meter
) -> None:
    a, _ = two_servers
    # two models on one server: two provider instances, one server, one limit
    settings = settings_with(
        summary=endpoint(a.api_base, "openai/small", max_concurrency=2),
        judge=endpoint(a.api_base, "openai/large"),
    )
    llms = resolve_role_llms(settings)
    assert llms["summary"] is not llms["judge"]
    await burst(llms, ("summary", "judge"))
    assert a.attempts == 8
    assert {r.body["model"] for r in a.requests} == {"small", "large"}
    assert meter.peak["a"] == 2  # reached, never passed


async def test_two_servers_do_not_share_a_limit(
    two_servers: tuple[FaultServer, FaultServer], meter: Meter
) -> None:
    a, b = two_servers
    settings = settings_with(
        summary=endpoint(a.api_base, max_concurrency=2),
        judge=endpoint(b.api_base, max_concurrency=2),
    )
    await burst(resolve_role_llms(settings), ("summary", "judge"))
    assert a.attempts == b.attempts == 4
    assert meter.peak["a"] <= 2 and meter.peak["b"] <= 2
    assert meter.peak["all"] > 2  # both servers busy at once: neither waited on the other's limit


def test_a_served_endpoint_does_not_spend_the_cloud_providers_limit() -> None:
    """Every litellm model without an api_base shares one limit; a server's is its own."""
    served = resolve_role_llms(settings_with(summary=endpoint(SERVED)))["summary"]
    cloud = LiteLLM("openai/gpt-4o-mini")
    assert served.concurrency_key == f"litellm@{SERVED}" != cloud.concurrency_key == "litellm"


def test_the_served_page_documents_every_endpoint_field() -> None:
    page = (REPO / "docs" / "served.md").read_text()
    for name in EndpointSettings.model_fields:
        assert f"| `{name}` |" in page, f"docs/served.md does not describe {name}"


async def test_json_object_mode_sends_the_schema_the_way_llama_cpp_python_takes_it() -> None:
    """llama-cpp-python's server rejects response_format type json_schema with a 500 (found
    against the real server); json_mode = "json_object" sends its own form."""
    schema = {"type": "object", "properties": {"choice": {"type": "string"}}, "required": ["choice"]}
    with (
        running_fault_server({"kind": "ok", "content": '{"choice": "A"}'}) as srv,
        switch.allow_model_requests(),
    ):
        llm = resolve_role_llms(settings_with(default=endpoint(srv.api_base, json_mode="json_object")))[
            "answer"
        ]
        completion = await llm.complete([Message.user("pick")], json_schema=schema)
        assert completion.json() == {"choice": "A"}
        assert srv.requests[0].body["response_format"] == {"type": "json_object", "schema": schema}
    assert load_settings("served", environ={}).llm.endpoints["default"].json_mode == "json_object"


async def test_the_judge_reads_yes_and_no_from_a_servers_top_logprobs() -> None:
    """litellm turns a real server's logprobs into objects, not dicts: both must be read."""
    fault = {"kind": "ok", "content": "Yes", "top_logprobs": {"Yes": -0.2231, "No": -1.6094, "The": -5.0}}
    with running_fault_server(fault) as srv, switch.allow_model_requests():
        judge = resolve_role_llms(settings_with(default=endpoint(srv.api_base)))["judge"]
        score = await judge.score_yes([Message.user("Is the sky blue? Yes or No.")])
    assert score.method == "logprobs"
    assert score.p_yes == pytest.approx(0.8 / (0.8 + 0.2), abs=1e-3)
    assert srv.requests[0].body["logprobs"] is True and srv.requests[0].body["max_tokens"] == 1
