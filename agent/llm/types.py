"""Provider-neutral request and response types of the LLM layer.

Every role (agent, summary, answer, judge) talks to its model through these, so a tool never
knows whether it runs on Claude, on litellm or on the local llama.cpp model.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, Field

__all__ = [
    "Completion",
    "JsonSchema",
    "Message",
    "Role",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "YesNoScore",
]

Role = Literal["agent", "summary", "answer", "judge", "other"]
JsonSchema = dict[str, Any]


class ToolCall(BaseModel):
    """One tool invocation the model asked for."""

    id: str = Field(description="Provider id of the call, echoed back with the tool result.")
    name: str = Field(description="Name of the tool.")
    arguments: dict[str, Any] = Field(default_factory=dict, description="Parsed JSON arguments.")


class Message(BaseModel):
    """One chat message.

    ``cache`` marks the end of a prefix worth caching (Anthropic prompt caching); providers
    without caching ignore it.
    """

    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    cache: bool = False

    @classmethod
    def system(cls, content: str, *, cache: bool = False) -> Message:
        return cls(role="system", content=content, cache=cache)

    @classmethod
    def user(cls, content: str, *, cache: bool = False) -> Message:
        return cls(role="user", content=content, cache=cache)

    @classmethod
    def assistant(cls, content: str, tool_calls: list[ToolCall] | None = None) -> Message:
        return cls(role="assistant", content=content, tool_calls=tool_calls or [])

    @classmethod
    def tool(cls, content: str, tool_call_id: str) -> Message:
        return cls(role="tool", content=content, tool_call_id=tool_call_id)


class ToolSpec(BaseModel):
    """A tool offered to the model: name, description and JSON-schema parameters."""

    name: str
    description: str
    parameters: JsonSchema = Field(default_factory=lambda: {"type": "object", "properties": {}})


class Usage(BaseModel):
    """Accounting for one model call."""

    role: str = "other"
    model: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = Field(
        default=0, description="Prompt tokens served from a cache (provider or llama.cpp prefix)."
    )
    cost_usd: float = 0.0
    seconds: float = 0.0
    calls: int = 1

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            role=self.role if self.role == other.role else "mixed",
            model=self.model if self.model == other.model else "mixed",
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cached_prompt_tokens=self.cached_prompt_tokens + other.cached_prompt_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
            seconds=self.seconds + other.seconds,
            calls=self.calls + other.calls,
        )


class Completion(BaseModel):
    """What a model returned for one call."""

    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage = Field(default_factory=Usage)

    def json(self) -> Any:  # type: ignore[override]
        """The reply parsed as JSON; raises ``MalformedResponseError`` naming the model."""
        from agent.core.errors import MalformedResponseError

        text = self.text.strip()
        if text.startswith("```"):
            # models sometimes fence JSON even in JSON mode
            text = text.strip("`")
            text = text[text.find("\n") + 1 :] if "\n" in text else text
        try:
            # strict=False: small models copy a passage's line breaks into a quote raw; the
            # value is still unambiguous, and rejecting it (measured: 1 in 30 answers) loses it
            return json.loads(text, strict=False)
        except json.JSONDecodeError as exc:
            # a reply cut off by the token limit is the usual cause, and the fix (raise
            # max_tokens) differs from a model that cannot write JSON, so the message says which
            cut_off = self.finish_reason in ("length", "max_tokens")
            cut = " (cut off at the max_tokens limit)" if cut_off else ""
            raise MalformedResponseError(
                f"reply is not valid JSON{cut} ({exc.msg} at {exc.pos}): {self.text[:200]!r}",
                model=self.usage.model or None,
            ) from exc


class YesNoScore(BaseModel):
    """P("Yes") for a yes/no question, as the judge uses it."""

    p_yes: float = Field(ge=0.0, le=1.0)
    usage: Usage = Field(default_factory=Usage)
    method: Literal["logits", "logprobs", "text"] = Field(
        default="text",
        description="How p_yes was obtained: next-token logits (local), API logprobs, or the "
        "constrained text answer (then 0 or 1).",
    )
