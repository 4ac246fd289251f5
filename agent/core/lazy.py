"""Lazy re-exports for package ``__init__`` files.

A package that imported its public names eagerly would import the layers above the one a
caller asked for: ``import corpus.store`` runs ``agent/__init__`` (the kernel lives under
``agent``), and an eager ``agent/__init__`` would import the whole application, back into
``corpus``, half-initialised. Each package instead names where each export lives and loads it
on first access (PEP 562).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, namespace: dict[str, Any], homes: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``, whose export ``name`` lives in ``homes[name]``."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        namespace[name] = value  # later lookups skip __getattr__
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *homes})

    return __getattr__, __dir__
