"""The error tree drawn in ``agent.core.errors`` is the real one, and it is the only one."""

from __future__ import annotations

import importlib
import pkgutil
import re
from dataclasses import dataclass

import pytest

from agent.core import errors
from tests.conftest import REPO

# Deliberately outside the tree: a signal asking the model to call a tool differently.
OUTSIDE_THE_TREE = {"tools.base.ToolRetry"}

_BRANCH = re.compile(r"^(?P<prefix>(?:│   |    )*)(?P<connector>├── |└── )(?P<name>\w+)")


@dataclass
class Node:
    name: str
    parent: str | None
    last: bool  # drawn with └──


def drawn_tree(doc: str) -> list[Node]:
    """The classes in the docstring's drawing, each with its parent, in drawing order."""
    lines = doc.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().split(" ")[0] == "ScholarloopError")
    indent = len(lines[start]) - len(lines[start].lstrip())
    nodes = [Node("ScholarloopError", None, last=True)]
    stack = ["ScholarloopError"]  # stack[d] is the latest node at depth d
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        match = _BRANCH.match(line[indent:])
        assert match, f"not a branch of the drawing: {line!r}"
        depth = len(match["prefix"]) // 4 + 1
        assert depth <= len(stack), f"{match['name']} is drawn deeper than its parent"
        del stack[depth:]
        nodes.append(Node(match["name"], stack[depth - 1], last=match["connector"] == "└── "))
        stack.append(match["name"])
    return nodes


def test_the_drawing_parses() -> None:
    nodes = drawn_tree(errors.__doc__ or "")
    assert len(nodes) > 10 and nodes[0].name == "ScholarloopError"


def test_every_error_is_drawn_exactly_once() -> None:
    names = [n.name for n in drawn_tree(errors.__doc__ or "")]
    assert len(names) == len(set(names)), f"drawn twice: {sorted({n for n in names if names.count(n) > 1})}"
    assert set(names) == set(errors.__all__)


def test_the_drawing_matches_the_class_hierarchy() -> None:
    for node in drawn_tree(errors.__doc__ or ""):
        cls = getattr(errors, node.name)
        if node.parent is None:
            assert cls.__bases__ == (Exception,)
        else:
            assert [b.__name__ for b in cls.__bases__] == [node.parent], (
                f"{node.name} is drawn under {node.parent} but derives from {cls.__bases__}"
            )


def test_last_children_are_drawn_as_last() -> None:
    nodes = drawn_tree(errors.__doc__ or "")
    for i, node in enumerate(nodes[1:], start=1):
        later_siblings = [n for n in nodes[i + 1 :] if n.parent == node.parent]
        assert node.last == (not later_siblings), f"{node.name}: wrong connector (├── vs └──)"


def test_all_lists_every_error_class_of_the_module() -> None:
    defined = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type)
        and issubclass(value, BaseException)
        and value.__module__ == errors.__name__
    }
    assert defined == set(errors.__all__)


def _project_modules() -> list[str]:
    found: list[str] = []
    for package in ("agent", "tools", "corpus"):
        found.append(package)
        for info in pkgutil.walk_packages([str(REPO / package)], prefix=f"{package}."):
            found.append(info.name)
    return sorted(found)


def test_every_project_error_derives_from_scholarloop_error() -> None:
    strays: list[str] = []
    outside: set[str] = set()
    for name in _project_modules():
        module = importlib.import_module(name)
        for value in vars(module).values():
            if not (isinstance(value, type) and issubclass(value, Exception)) or value.__module__ != name:
                continue
            qualified = f"{name}.{value.__qualname__}"
            if qualified in OUTSIDE_THE_TREE:
                outside.add(qualified)
            elif not issubclass(value, errors.ScholarloopError):
                strays.append(qualified)
    assert strays == [], "errors outside the ScholarloopError tree"
    assert outside == OUTSIDE_THE_TREE  # the exception list names nothing stale


@pytest.mark.parametrize(
    ("error", "base"),
    [
        (errors.RateLimitError("429"), errors.TransientError),
        (errors.ServiceTimeoutError("t"), errors.ServiceError),
        (errors.NetworkDownError("down"), errors.OnlineError),
        (errors.FetchError("not a PDF"), errors.OnlineError),
        (errors.ModelRequestsDisabledError("off"), errors.LLMError),
    ],
)
def test_callers_can_catch_by_branch(error: Exception, base: type[Exception]) -> None:
    assert isinstance(error, base) and isinstance(error, errors.ScholarloopError)


def test_network_down_is_not_transient() -> None:
    # the retry engine retries TransientError only: an unreachable network must fail at once
    assert not issubclass(errors.NetworkDownError, errors.TransientError)


def test_errors_name_the_service_and_keep_their_details() -> None:
    limited = errors.RateLimitError("rate limited (429)", service="anthropic:claude", retry_after=3.0)
    assert str(limited) == "[anthropic:claude] rate limited (429)" and limited.retry_after == 3.0
    llm = errors.LLMError("bad request", model="litellm:gpt")
    assert llm.model == llm.service == "litellm:gpt" and str(llm) == "[litellm:gpt] bad request"
    missing = errors.MissingAPIKeyError("anthropic", ["ANTHROPIC_API_KEY"], "claude-x")
    assert "ANTHROPIC_API_KEY" in str(missing)
