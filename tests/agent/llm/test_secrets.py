"""No API key leaves the process in anything a user sees, saves or shares.

A key is planted in the environment, requests that succeed and fail go to the loopback fault
server (some failures echo the key back, as careless OpenAI-compatible servers do), and
everything the run produces is searched for it: exception messages and their ``-v``
tracebacks, log records at DEBUG (ours and litellm's), the Answer JSON with its trace, the
JSONL of a batch, ``scholarloop ask --json`` and ``scholarloop doctor --json``.
"""

from __future__ import annotations

import json
import logging
import traceback
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from click.testing import CliRunner

from agent.api import aask_many
from agent.cli.main import cli
from agent.core.errors import LLMError, ServiceError, ServiceUnavailableError
from agent.core.retry import RetryPolicy
from agent.core.settings import Settings
from agent.core.state import Status
from agent.llm import Message, switch
from agent.llm.anthropic_provider import AnthropicLLM
from agent.llm.litellm_provider import LiteLLM
from agent.llm.testing import FunctionLLM
from tests.agent.conftest import keyword_judge, keyword_summary, make_session
from tests.agent.llm.fault_server import Fault, FaultServer, running_fault_server
from tests.agent.llm.test_faults import BROKEN, OTHER, Q, answering

OPENAI_KEY = "sk-planted-SECRET123"
ANTHROPIC_KEY = "sk-ant-planted-SECRET456"
# the distinctive middle of each key: a leak of most of a key counts too
MARKERS = ("SECRET123", "SECRET456", "planted")
LOGGERS = ("", "LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "httpx", "httpcore", "openai", "anthropic")
POLICY = RetryPolicy(max_retries=1, base_delay_s=0.0, jitter=0.0)

ECHO_401: Fault = {"kind": "status", "code": 401, "echo_key": True}
ECHO_500: Fault = {"kind": "status", "code": 500, "echo_key": True}  # retried: logged before each retry
FAULTS = [
    {"kind": "ok", "content": "fine"},
    ECHO_401,
    ECHO_500,
    {"kind": "status", "code": 429, "headers": {"Retry-After": "1"}},
    {"kind": "hang", "seconds": 30.0},
    {"kind": "drop"},
    {"kind": "bad_json"},
]


def assert_clean(*texts: str) -> None:
    for text in texts:
        for marker in MARKERS:
            assert marker not in text, f"{marker!r} leaked in: {text[:2000]}"


def everything_about(exc: BaseException) -> str:
    """What any caller could print: message, repr, and the traceback with its causes."""
    return "\n".join([str(exc), repr(exc), "".join(traceback.format_exception(exc))])


def logged(caplog: pytest.LogCaptureFixture) -> str:
    parts = [caplog.text]
    for record in caplog.records:
        parts += [record.getMessage(), repr(record.args), record.exc_text or ""]
        if record.exc_info and record.exc_info[1] is not None:
            parts.append(everything_about(record.exc_info[1]))
    return "\n".join(parts)


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, sleeps: list[float]) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    for name in LOGGERS:
        caplog.set_level(logging.DEBUG, logger=name)


@pytest.fixture
def server(keys: None) -> Iterator[FaultServer]:
    with running_fault_server() as srv, switch.allow_model_requests():
        yield srv


def litellm_on(srv: FaultServer) -> LiteLLM:
    return LiteLLM("openai/test-model", api_base=srv.api_base, timeout_s=0.5, retry=POLICY)


@pytest.mark.parametrize("fault", FAULTS, ids=lambda f: f"{f['kind']}-{f.get('code', '')}")
async def test_litellm_requests_leak_no_key(
    server: FaultServer, caplog: pytest.LogCaptureFixture, fault: Fault
) -> None:
    server.default = fault
    seen: list[str] = []
    try:
        completion = await litellm_on(server).complete([Message.user("hi")])
        seen.append(completion.model_dump_json())
    except ServiceError as exc:
        seen.append(everything_about(exc))
    # the key really was in play: sent to the server on every attempt
    assert {r.headers.get("authorization") for r in server.requests} == {f"Bearer {OPENAI_KEY}"}
    assert_clean(*seen, logged(caplog))


@pytest.mark.parametrize("fault", [ECHO_401, ECHO_500], ids=["401", "500"])
async def test_an_echoed_key_is_replaced_by_its_name(server: FaultServer, fault: Fault) -> None:
    """The user still learns which key the server rejected, without the key itself."""
    server.default = fault
    with pytest.raises(ServiceError) as caught:
        await litellm_on(server).complete([Message.user("hi")])
    assert "Incorrect API key provided: [OPENAI_API_KEY redacted]" in str(caught.value)
    assert caught.value.__cause__ is None  # the SDK's exception, holding the key, is not chained
    if fault is ECHO_500:  # still the transient class: the retry engine treats it as before
        assert isinstance(caught.value, ServiceUnavailableError) and server.attempts == 2


@pytest.mark.parametrize("explicit", [False, True], ids=["env-key", "constructor-key"])
@pytest.mark.parametrize("fault", [ECHO_401, ECHO_500, {"kind": "drop"}], ids=["401", "500", "drop"])
async def test_anthropic_requests_leak_no_key(
    server: FaultServer,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    fault: Fault,
    explicit: bool,
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{server.port}")
    if explicit:  # a key given in code, not in the environment, is known to the provider too
        monkeypatch.delenv("ANTHROPIC_API_KEY")
    server.default = fault
    # our own HTTP client, closed here: the SDK's would keep a socket open past the test's loop
    async with httpx2.AsyncClient() as http:
        key = ANTHROPIC_KEY if explicit else None
        llm = AnthropicLLM("claude-haiku-4-5", api_key=key, http_client=http, timeout_s=0.5, retry=POLICY)
        with pytest.raises(ServiceError) as caught:
            await llm.complete([Message.user("hi")])
    sent = server.requests[0].headers  # the SDK sends x-api-key or, in newer versions, a bearer token
    assert ANTHROPIC_KEY in (sent.get("x-api-key"), sent.get("authorization", "").removeprefix("Bearer "))
    assert_clean(everything_about(caught.value), logged(caplog))


async def test_a_batch_saves_and_logs_no_key(
    server: FaultServer, caplog: pytest.LogCaptureFixture, index_dir: Path, settings: Settings, tmp_path: Path
) -> None:
    server.route = answering({BROKEN: ECHO_401})
    session = make_session(index_dir, settings, answer=litellm_on(server))
    out = tmp_path / "answers.jsonl"
    answers = await aask_many([Q, BROKEN, OTHER], session=session, out=out, progress=False)
    assert [a.status for a in answers] == [Status.answered, Status.failed, Status.answered]
    assert answers[1].error is not None and "[OPENAI_API_KEY redacted]" in answers[1].error
    assert any(s.error and "redacted" in s.error for s in answers[1].trace)
    assert_clean(out.read_text(), *(a.model_dump_json() for a in answers), logged(caplog))


async def test_a_foreign_error_carrying_a_key_becomes_a_clean_llm_error(keys: None) -> None:
    """Code inside a provider that fails outside the error tree (a bug, an unmapped SDK error)
    may still quote the key; it comes out as an LLMError without it."""

    def leaky(_request: object) -> str:
        raise RuntimeError(f"client built with api_key={OPENAI_KEY}")

    with pytest.raises(
        LLMError, match=r"RuntimeError: client built with api_key=\[OPENAI_API_KEY redacted\]"
    ) as caught:
        await FunctionLLM(leaky).complete([Message.user("hi")])
    assert_clean(everything_about(caught.value))


def test_cli_ask_json_and_verbose_logs_leak_no_key(
    server: FaultServer,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    index_dir: Path,
) -> None:
    roles = {
        "summary": FunctionLLM(keyword_summary),
        "judge": FunctionLLM(lambda r: "No", score_function=keyword_judge),
        "answer": litellm_on(server),
    }
    roles["agent"] = roles["answer"]
    monkeypatch.setattr("agent.api.resolve_role_llms", lambda settings: roles)
    server.default = ECHO_500
    result = CliRunner().invoke(
        cli,
        ["--json", "-v", "--set", "embedding.model=hash", "ask", Q, "--index", str(index_dir)],
    )
    data = json.loads(result.stdout)
    assert data["status"] in ("failed", "truncated") and "[OPENAI_API_KEY redacted]" in data["error"]
    assert server.attempts >= 2  # the failing request really went out, and was retried
    assert_clean(result.stdout, result.stderr, logged(caplog))


def test_doctor_json_shows_keys_masked(keys: None) -> None:
    result = CliRunner().invoke(
        cli, ["--json", "--set", "llm.default=openai/test-model", "doctor", "--no-generate"]
    )
    assert_clean(result.stdout, result.stderr)
    details = {c["name"]: c["detail"] for c in json.loads(result.stdout)["checks"]}
    assert details["env OPENAI_API_KEY"] == "set (…T123)"
    assert details["env ANTHROPIC_API_KEY"] == "set (…T456)"
    assert details["role answer"] == "openai/test-model (provider litellm)"
