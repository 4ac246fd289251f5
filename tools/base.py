"""The ``@tool`` decorator, the injected :class:`ToolContext`, and :class:`ToolRetry`.

A tool is an async function whose first parameter is the context (hidden from the model) and
whose other parameters are what the model fills in. The decorator reads the docstring's
``Args:`` section into the JSON schema the model sees, and refuses a tool with an argument that
has no description: the docstring *is* the prompt.

``ToolRetry`` sits outside the error tree on purpose. It is not a failure: it tells the loop to
send the message back to the model as an observation, so the model can try again.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, get_type_hints

from agent.core.settings import Settings
from agent.core.state import RunState
from agent.llm.base import BaseLLM
from agent.llm.types import Message, ToolSpec

if TYPE_CHECKING:
    from corpus.search import Filters, LocalSearch
    from tools.online_search import OnlineSearch

__all__ = ["Tool", "ToolContext", "ToolRetry", "tool"]


class ToolRetry(Exception):
    """Ask the model to call the tool again differently (the message says how)."""


def _no_filters() -> Filters:
    from corpus.search import Filters  # numpy and scipy load only when a context is made

    return Filters()


@dataclass
class ToolContext:
    """What every tool may use; the model never sees it.

    ``base_filters`` are the run's own limits (excluded papers, years); ``filters`` are what
    ``gather_evidence`` reads with: the base ones narrowed to the run's candidate papers.
    """

    state: RunState
    settings: Settings
    llms: dict[str, BaseLLM]
    searcher: LocalSearch | None = None
    filters: Filters | None = None
    on_event: Callable[[str, dict[str, Any]], None] | None = None
    base_filters: Filters = field(default_factory=_no_filters)
    online: OnlineSearch | None = None

    def llm(self, role: str) -> BaseLLM:
        return self.llms[role]

    async def p_yes(self, messages: list[Message]) -> float:
        """The judge's P(Yes) for a Yes/No question, its tokens counted against the run."""
        score = await self.llm("judge").score_yes(messages)
        self.state.add_usage(score.usage)
        return score.p_yes

    def emit(self, event: str, **data: Any) -> None:
        if self.on_event is not None:
            self.on_event(event, data)


_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _arg_docs(doc: str) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its description and ``Args:`` entries."""
    head, _, rest = doc.partition("Args:")
    args: dict[str, str] = {}
    current = None
    for line in rest.splitlines():
        match = re.match(r"\s{2,}(\w+)(?:\s*\([^)]*\))?:\s*(.*)", line)
        if match:
            current = match.group(1)
            args[current] = match.group(2).strip()
        elif current and line.strip():
            args[current] += " " + line.strip()
        elif not line.strip():
            current = None if args else current
    return " ".join(head.split()), args


@dataclass
class Tool:
    name: str
    description: str
    function: Callable[..., Awaitable[str]]
    parameters: dict[str, Any]

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters)

    async def __call__(self, ctx: ToolContext, **arguments: Any) -> str:
        unknown = set(arguments) - set(self.parameters["properties"])
        if unknown:
            raise ToolRetry(
                f"{self.name} has no argument(s) {sorted(unknown)}; "
                f"use {sorted(self.parameters['properties'])}"
            )
        missing = [a for a in self.parameters.get("required", []) if a not in arguments]
        if missing:
            raise ToolRetry(f"{self.name} needs argument(s) {missing}")
        return await self.function(ctx, **arguments)


def tool(function: Callable[..., Awaitable[str]]) -> Tool:
    """Make an async ``(ctx, **args) -> observation`` function a tool the model can call."""
    description, docs = _arg_docs(inspect.getdoc(function) or "")
    if not description:
        raise TypeError(f"tool {function.__name__} needs a docstring: it is the model's prompt")
    hints = get_type_hints(function)
    params = list(inspect.signature(function).parameters.values())[1:]
    properties: dict[str, Any] = {}
    required: list[str] = []
    for p in params:
        if p.name not in docs:
            raise TypeError(f"tool {function.__name__}: argument {p.name!r} is not described under Args:")
        hint = hints.get(p.name, str)
        json_type = _JSON_TYPES.get(hint, "string")
        properties[p.name] = {"type": json_type, "description": docs[p.name]}
        if p.default is inspect.Parameter.empty:
            required.append(p.name)
    schema = {"type": "object", "properties": properties, "required": required}
    return Tool(name=function.__name__, description=description, function=function, parameters=schema)
