import socket

import pytest

from agent.core.errors import ModelRequestsDisabledError
from agent.llm import Message, switch
from agent.llm.litellm_provider import LiteLLM
from tests.conftest import NetworkBlockedError


def test_switch_is_off_during_tests() -> None:
    assert switch.model_requests_allowed() is False


async def test_real_provider_without_opt_in_fails_loudly() -> None:
    with pytest.raises(ModelRequestsDisabledError, match="disabled"):
        await LiteLLM("ollama/llama3").complete([Message.user("hi")])


def test_sockets_cannot_reach_the_network() -> None:
    with socket.socket() as s, pytest.raises(NetworkBlockedError):
        s.connect(("93.184.216.34", 443))
    with socket.socket() as s, pytest.raises(NetworkBlockedError):
        s.connect(("api.anthropic.com", 443))
