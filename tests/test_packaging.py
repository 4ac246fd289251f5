import importlib
import importlib.metadata
from pathlib import Path

import pytest

from tests.conftest import REPO


@pytest.mark.parametrize("package", ["agent", "tools", "corpus"])
def test_packages_resolve_to_this_repo(package: str) -> None:
    # "tools" and "corpus" are also names of unrelated PyPI projects: make sure we get ours.
    module = importlib.import_module(package)
    assert module.__file__ is not None
    assert Path(module.__file__).resolve().parent == REPO / package


def test_console_script_is_declared() -> None:
    scripts = {ep.name: ep.value for ep in importlib.metadata.entry_points(group="console_scripts")}
    assert scripts.get("scholarloop") == "agent.cli.main:main"


@pytest.mark.parametrize(
    "module",
    [
        "agent.core.errors",
        "agent.core.retry",
        "agent.core.settings",
        "agent.llm",
        "agent.llm.types",
        "agent.llm.base",
        "agent.llm.testing",
        "agent.llm.factory",
        "agent.llm.local_models",
    ],
)
def test_explicit_all_is_importable(module: str) -> None:
    mod = importlib.import_module(module)
    assert mod.__all__, f"{module} has an empty __all__"
    for name in mod.__all__:
        assert hasattr(mod, name), f"{module}.__all__ names missing {name}"


def test_error_tree_has_one_root() -> None:
    from agent.core import errors

    for name in errors.__all__:
        cls = getattr(errors, name)
        assert issubclass(cls, errors.ScholarloopError)
