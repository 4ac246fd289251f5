"""One LLM layer for every role: Anthropic, litellm, local llama.cpp, and test doubles.

``resolve_llm("local:qwen2.5-coder-1.5b", settings)`` gives an object with ``complete`` and
``score_yes``; :mod:`agent.llm.testing` holds the scripted and function doubles.
"""

from agent.core.retry import RetryPolicy
from agent.llm import switch
from agent.llm.base import LLM, BaseLLM
from agent.llm.factory import provider_of, resolve_llm, resolve_role_llms
from agent.llm.types import Completion, Message, ToolCall, ToolSpec, Usage, YesNoScore

__all__ = [
    "LLM",
    "BaseLLM",
    "Completion",
    "Message",
    "RetryPolicy",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "YesNoScore",
    "provider_of",
    "resolve_llm",
    "resolve_role_llms",
    "switch",
]
